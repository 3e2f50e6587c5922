// libmlav_test_faulty_plugin.so: the CPU plugin's table wrapped by a table that misbehaves on
// purpose, one fault per config ("fault=NAME[&p=N]"), so every check of guarded runs has a mutant
// it must kill. A plain C table over another table: the shape a ctypes-built table has too.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "cpu/cpu_backend.h"
#include "mlaverify/c_api.h"
#include "plugin/plugin_backend.h"

namespace {

using namespace mlaverify;

enum class Fault {
  None,
  PastEnd,      // one o_lat element past the buffer's extent
  BeforeStart,  // one o_lat element before the buffer
  RowAfter,     // o_lat row T (the first row t >= T), head 0, column 0
  HeadGap,      // column 512 of token 0, head 0: inside the head stride's gap when it has one
  LsePastEnd,   // lse[max_total_q * H]
  WsPastEnd,    // the byte after the workspace
  InputWrite,   // q's first byte (inputs are read-only)
  NoLse,        // declares no MLAV_CAP_WRITES_LSE, yet the CPU backend under it writes lse
  CrashP,       // SIGSEGV when any request has prefix >= p
  HangP,        // never returns when any request has prefix >= p (p = 0: always)
};

struct Faulty {
  mlav_backend inner;
  Fault fault = Fault::None;
  int64_t threshold = 0;
  std::string name;
};

Faulty& self_of(void* s) { return *static_cast<Faulty*>(s); }

int64_t max_prefix(const VerifyParams& p) {
  int64_t m = 0;
  for (int32_t i = 0; i < p.batch_size; ++i) m = std::max(m, request_extent(p, i).prefix_len);
  return m;
}

int64_t o_extent_elements(const VerifyParams& p) {
  return (p.max_total_q - 1) * p.o_token_stride + (p.num_heads - 1) * p.o_head_stride + kLatentDim;
}

// Writes a finite nonzero value (1.0) at element e of o_lat.
void poke_o(const VerifyParams& p, int64_t e) {
  if (p.o_dtype == DType::F32) {
    static_cast<float*>(p.o_lat)[e] = 1.0f;
  } else {
    static_cast<uint16_t*>(p.o_lat)[e] = 0x3F80;  // bf16 1.0
  }
}

mlav_status caps(void* s, mlav_capabilities* c, char* err, size_t n) {
  Faulty& f = self_of(s);
  const mlav_status st = f.inner.capabilities(f.inner.self, c, err, n);
  if (f.fault == Fault::NoLse) c->flags &= ~MLAV_CAP_WRITES_LSE;
  return st;
}
mlav_status can(void* s, const mlav_params* p, char* why, size_t n) {
  Faulty& f = self_of(s);
  return f.inner.can_implement(f.inner.self, p, why, n);
}
// A workspace of its own (the exported CPU table asks for none), so ws_past_end has one to
// overrun.
constexpr uint64_t kFaultyWorkspace = 4096;
mlav_status ws(void* s, const mlav_params* p, uint64_t* bytes, char* err, size_t n) {
  Faulty& f = self_of(s);
  const mlav_status st = f.inner.workspace_bytes(f.inner.self, p, bytes, err, n);
  *bytes += kFaultyWorkspace;
  return st;
}

mlav_status run(void* s, const mlav_params* c, void* workspace, uint64_t ws_bytes, void* stream,
                char* err, size_t n) {
  Faulty& f = self_of(s);
  const VerifyParams p = plugin::from_c_params(c);
  if (f.fault == Fault::CrashP && max_prefix(p) >= f.threshold) raise(SIGSEGV);
  if (f.fault == Fault::HangP && max_prefix(p) >= f.threshold) {
    for (;;) pause();
  }
  const mlav_status st = f.inner.run(f.inner.self, c, workspace, ws_bytes, stream, err, n);
  if (st != MLAV_OK) return st;
  const int64_t T = p.qo_indptr[p.batch_size];
  switch (f.fault) {
    case Fault::PastEnd:
      poke_o(p, o_extent_elements(p));
      break;
    case Fault::BeforeStart:
      poke_o(p, -1);
      break;
    case Fault::RowAfter:
      poke_o(p, T * p.o_token_stride);
      break;
    case Fault::HeadGap:
      poke_o(p, kLatentDim);
      break;
    case Fault::LsePastEnd:
      if (p.lse != nullptr) p.lse[p.max_total_q * p.num_heads] = 0.0f;
      break;
    case Fault::WsPastEnd:
      if (workspace != nullptr) static_cast<unsigned char*>(workspace)[ws_bytes] = 1;
      break;
    case Fault::InputWrite:
      *static_cast<unsigned char*>(const_cast<void*>(p.q)) ^= 1;
      break;
    default:
      break;
  }
  return MLAV_OK;
}

void destroy(void* s) {
  Faulty* f = static_cast<Faulty*>(s);
  if (f->inner.destroy != nullptr) f->inner.destroy(f->inner.self);
  delete f;
}

}  // namespace

extern "C" MLAV_EXPORT mlav_status mlav_plugin_open(uint32_t abi_version, const char* config,
                                                    mlav_backend* out, char* err, size_t err_size) {
  auto f = std::make_unique<Faulty>();
  std::string_view cfg = config != nullptr ? config : "";
  std::string fault_name = "none";
  while (!cfg.empty()) {
    const size_t amp = cfg.find('&');
    const std::string item(cfg.substr(0, amp));
    cfg = amp == std::string_view::npos ? std::string_view() : cfg.substr(amp + 1);
    if (item.rfind("fault=", 0) == 0) {
      fault_name = item.substr(6);
    } else if (item.rfind("p=", 0) == 0) {
      f->threshold = std::atoll(item.c_str() + 2);
    } else {
      plugin::write_error(err, err_size, "faulty plugin: unknown config item '" + item + "'");
      return MLAV_INVALID_INPUT;
    }
  }
  static const std::pair<const char*, Fault> kFaults[] = {{"none", Fault::None},
                                                          {"past_end", Fault::PastEnd},
                                                          {"before_start", Fault::BeforeStart},
                                                          {"row_after", Fault::RowAfter},
                                                          {"head_gap", Fault::HeadGap},
                                                          {"lse_past_end", Fault::LsePastEnd},
                                                          {"ws_past_end", Fault::WsPastEnd},
                                                          {"input_write", Fault::InputWrite},
                                                          {"no_lse", Fault::NoLse},
                                                          {"crash", Fault::CrashP},
                                                          {"hang", Fault::HangP}};
  bool known = false;
  for (const auto& [n, v] : kFaults) {
    if (fault_name == n) {
      f->fault = v;
      known = true;
    }
  }
  if (fault_name == "bad_table") {
    // A table that breaks the ABI: mlaverify must reject it with one line, not call it.
    std::memset(out, 0, sizeof(*out));
    out->struct_size = 4;
    return MLAV_OK;
  }
  if (!known) {
    plugin::write_error(err, err_size, "faulty plugin: unknown fault '" + fault_name + "'");
    return MLAV_INVALID_INPUT;
  }
  // The CPU backend with one worker thread: the worker process stays single-threaded-ish and
  // cheap to fork again after a crash.
  f->inner = plugin::export_backend(cpu::make_cpu_backend({.threads = 1}));
  f->name = "faulty[" + fault_name + "]";
  mlav_backend t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_version = MLAV_ABI_VERSION;
  t.name = f->name.c_str();
  t.memory = MLAV_MEMORY_HOST;
  t.capabilities = caps;
  t.can_implement = can;
  t.workspace_bytes = ws;
  t.run = run;
  t.destroy = destroy;
  t.self = f.release();
  (void)abi_version;
  std::memcpy(out, &t, std::min<size_t>(out->struct_size, sizeof(t)));
  return MLAV_OK;
}

// libFuzzer harness for the server-dump loader: the whole path a user's .safetensors file takes
// through `mlaverify replay` and `diagnose`. The bytes are parsed in memory
// (ServerDump::from_bytes: the safetensors container, then every tensor checked against the
// others). A dump that loads must hold the parent arrays its file gives; it is handed to
// params() and, when its attention is small enough to recompute within the per-input time, to
// model::validate_params, the replay reference and the element-wise comparison with the server's
// o, and, smaller still, to diagnose's readings. InvalidInput is the only acceptable failure of
// the load (and of diagnose); any other exception, an InvalidInput from replaying a dump that
// loaded, a loaded value that differs from the file's, or a sanitizer report, is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "dump/diagnose.h"
#include "dump/dump.h"
#include "dump/replay.h"
#include "dump/safetensors.h"
#include "mlaverify/error.h"
#include "model/validate.h"

namespace {

using namespace mlaverify;

// Inputs beyond this many multiply-adds of attention (sum_i D_i (P_i + D_i) H 576, the reference's
// cost) stop after the load, so that executions stay in the hundreds a second under the
// sanitizers (the seeds, fuzz/seeds/dump, sit below it); diagnose re-runs the model ~20 times,
// so only the smallest get it (tests/dump diagnoses the shipped dumps). MLAV_FUZZ_FULL=1 lifts
// the replay limit: scripts/fuzz.sh runs the shipped full-size dumps through load and replay
// that way before the time-boxed run.
constexpr double kReplayWork = 2e5;
constexpr double kDiagnoseWork = 2e4;

// A budget far below the default 8 GiB, so an input cannot push the harness past libFuzzer's
// -rss_limit_mb through allocations the loader's own budget would allow.
constexpr int64_t kMaxBytes = int64_t{256} << 20;

[[noreturn]] void fail(const char* stage, const char* what) {
  std::fprintf(stderr, "dump_fuzzer: %s threw something other than InvalidInput: %s\n", stage,
               what);
  std::abort();
}

// MLAV_FUZZ_VERBOSE=1: say what became of each input (for looking at seeds and crashes).
bool verbose() {
  static const bool v = std::getenv("MLAV_FUZZ_VERBOSE") != nullptr;
  return v;
}

bool full() {
  static const bool f = std::getenv("MLAV_FUZZ_FULL") != nullptr;
  return f;
}

double attention_work(const dump::ServerDump& d) {
  double w = 0;
  for (int32_t i = 0; i < d.batch_size(); ++i) {
    const double D = d.draft_nodes(i), P = static_cast<double>(d.prefix_len(i));
    w += D * (P + D);
  }
  return w * d.num_heads() * kRowDim;
}

// What the loader keeps must be what the file says: the trees' parent arrays read back from the
// metadata as int64 equal the loaded int32 ones (a value must not wrap into a valid parent).
void check_parents(const dump::ServerDump& d, const std::vector<std::byte>& bytes) {
  const dump::SafetensorsFile f = dump::SafetensorsFile::parse(bytes, "fuzz");
  const auto it = f.metadata().find("parents");
  if (it == f.metadata().end()) return;
  const auto lists = dump::parse_int_lists(it->second, "parents", 1u << 20, 1u << 20);
  for (size_t i = 0; i < d.parents().size(); ++i) {
    for (size_t t = 0; t < d.parents()[i].size(); ++t) {
      if (lists.at(i).at(t) != d.parents()[i][t]) {
        std::fprintf(stderr, "dump_fuzzer: parents[%zu][%zu] is %lld in the file, %d loaded\n", i,
                     t, static_cast<long long>(lists[i][t]), d.parents()[i][t]);
        std::abort();
      }
    }
  }
}

void exercise(dump::ServerDump& d) {
  VerifyParams p = d.params();
  (void)d.held_bytes();
  (void)d.findings();
  const double work = attention_work(d);
  if (verbose()) {
    std::fprintf(stderr, "dump_fuzzer: loaded: bs %d (real %d), T %lld, H %d, work %.3g%s%s\n",
                 d.batch_size(), d.real_batch_size(), static_cast<long long>(d.total_tokens()),
                 d.num_heads(), work, work > kReplayWork && !full() ? ", too large to replay" : "",
                 d.has_o() && work <= kDiagnoseWork ? ", diagnosed" : "");
  }
  if (work > kReplayWork && !full()) return;
  const dump::KernelAssumptions assume;
  try {
    // The loader ran validate_params on these very params: a dump that loads must replay, so an
    // InvalidInput here is a loader bug (it let through what replay cannot read), not bad input.
    model::validate_params(p);
    const dump::Reference ref = dump::reference(d, assume);
    if (d.has_o()) {
      const dump::Comparison c = dump::compare(d.params(), d.real_batch_size(), d.server_o(),
                                               d.server_lse(), ref.o, ref.lse, ref.bound);
      (void)c.pass();
      (void)c.worst_ratio();
      (void)c.worst();
    }
  } catch (const InvalidInput& e) {
    std::fprintf(stderr, "dump_fuzzer: a dump that loaded does not replay: %s\n", e.what());
    std::abort();
  }
  if (d.has_o() && work <= kDiagnoseWork) {
    const dump::Diagnosis diag = dump::diagnose(d, assume);
    (void)diag.verdict.size();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  dump::LoadLimits limits;
  limits.max_bytes = kMaxBytes;
  const char* stage = "ServerDump::from_bytes";
  try {
    const std::vector<std::byte> input(bytes, bytes + size);
    dump::ServerDump d = dump::ServerDump::from_bytes(input, "fuzz", limits);
    stage = "the loaded dump's parents against the file's";
    check_parents(d, input);
    stage = "replay of a loaded dump (params, validate_params, reference, compare, diagnose)";
    exercise(d);
  } catch (const InvalidInput& e) {
    if (verbose()) std::fprintf(stderr, "dump_fuzzer: rejected: %s\n", e.what());
    return 0;
  } catch (const std::exception& e) {
    fail(stage, e.what());
  } catch (...) {
    fail(stage, "a non-std exception");
  }
  return 0;
}

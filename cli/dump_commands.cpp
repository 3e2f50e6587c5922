// `mlaverify replay DUMP.safetensors` and `mlaverify diagnose DUMP.safetensors`: a server's own
// verify call recomputed with the model, compared element by element, and explained.
#include "cli/dump_commands.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli/backends.h"
#include "cli/json_writer.h"
#include "dump/diagnose.h"
#include "dump/dump.h"
#include "dump/replay.h"
#include "mlaverify/bf16.h"
#include "mlaverify/error.h"

namespace mlaverify::cli {
namespace {

// What the model pass costs: on this project's 2-core machine the double-precision model plus
// the bound pass ran the shared k2_eagle16 dump (0.18 GFLOP as counted below) in 0.017 s, about
// 10 GFLOP/s; the estimate assumes 2 GFLOP/s so a slower machine still finishes inside it.
constexpr double kModelFlopsPerSecond = 2e9;

double model_flops(const dump::ServerDump& d) {
  double f = 0;
  for (int32_t i = 0; i < d.batch_size(); ++i) {
    const double keys = static_cast<double>(d.prefix_len(i) + d.draft_nodes(i));
    // scores (576 MACs) and P.V (512 MACs) per (token, head, key), once in the model and once in
    // the bound pass (which also sums |q k| and |v|).
    f += 2.0 * d.draft_nodes(i) * d.num_heads() * keys * (2.0 * kRowDim + 3.0 * kLatentDim);
  }
  return f;
}

std::string g(double v, int precision = 3) {
  std::ostringstream s;
  s << std::setprecision(precision) << v;
  return s.str();
}

std::string where(const dump::RequestResult& r) {
  std::ostringstream s;
  s << "(request " << r.request << ", token " << r.worst_token << ", head " << r.worst_head << ", ";
  if (r.worst_column >= 0) {
    s << "column " << r.worst_column << ")";
  } else {
    s << "lse)";
  }
  return s.str();
}

void describe_dump(const dump::ServerDump& d, std::ostream& out) {
  out << "  " << d.real_batch_size() << " requests";
  if (d.batch_size() > d.real_batch_size()) {
    out << " + " << (d.batch_size() - d.real_batch_size()) << " CUDA-graph padded";
  }
  out << ", " << d.total_tokens() << " tokens x " << d.num_heads() << " heads";
  if (!d.preset().empty()) out << ", " << d.preset() << " tp" << d.tp();
  out << ", sm_scale " << std::setprecision(7) << d.sm_scale() << ", "
      << (d.layout() == LayoutKind::LatentFirst ? "latent-first" : "rope-first") << " rows, draft KV "
      << (d.draft_source() == DraftKvSource::ExtendRows ? "from k_extend" : "from the pool")
      << ", mask_indptr "
      << (d.mask_indptr_convention() == IndptrConvention::Csr ? "CSR [bs+1]" : "offsets [bs]")
      << "\n  D = [";
  for (int32_t i = 0; i < d.batch_size(); ++i) out << (i ? "," : "") << d.draft_nodes(i);
  out << "], P = [";
  for (int32_t i = 0; i < d.batch_size(); ++i) out << (i ? "," : "") << d.prefix_len(i);
  out << "]\n";
}

// Bad input: one line naming file, field and index, or with --json one JSON object saying it.
void bad_input(const std::filesystem::path& path, const DumpOptions& o, const std::string& field,
               int64_t index, const std::string& what, std::ostream& out) {
  if (o.json) {
    JsonWriter j(out);
    j.begin_object().field("command", o.command).field("exit_code", int64_t{2});
    j.field("file", path.string());
    j.field("field", field).field("index", index).field("error", what).end_object();
    out << "\n";
  } else {
    out << "mlaverify: bad input: " << what << "\n";
  }
}

// The dump, or exit code 2 with one line naming file, field and index.
bool load(const std::filesystem::path& path, const DumpOptions& o, dump::ServerDump& d,
          std::ostream& out, int& code) {
  try {
    d = dump::ServerDump::load(path, dump::LoadLimits{o.max_memory});
  } catch (const InvalidInput& e) {
    bad_input(path, o, e.field(), e.index(), e.what(), out);
    code = 2;
    return false;
  }
  const double seconds = model_flops(d) / kModelFlopsPerSecond;
  if (seconds > o.max_seconds) {
    bad_input(path, o, path.string(), -1,
              path.string() + ": the model pass needs about " + g(model_flops(d) / 1e9) +
                  " GFLOP (~" + g(seconds) + " s here), over the budget of " +
                  g(o.max_seconds) + " s (raise it with --max-seconds)",
              out);
    code = 2;
    return false;
  }
  return true;
}

void request_line(const dump::RequestResult& r, std::ostream& out) {
  out << "    request " << r.request << (r.padded ? " (padded)" : "") << " D=" << r.draft_nodes
      << " P=" << r.prefix_len << ": rel_frob " << g(r.rel_frobenius) << ", max_abs "
      << g(r.max_abs) << " (max|ref| " << g(r.max_ref) << "), worst " << g(r.worst_ratio)
      << "x bound at " << where(r) << " got " << g(r.worst_got, 6) << " ref "
      << g(r.worst_ref, 6) << " bound " << g(r.worst_bound) << "  "
      << (r.padded ? "(padded: not judged)" : (r.pass() ? "ok" : "MISMATCH"));
  if (r.over > 0) out << ", " << r.over << " elements beyond bound";
  if (r.nonfinite > 0) out << ", " << r.nonfinite << " non-finite";
  out << "\n";
}

void json_comparison(JsonWriter& j, const dump::Comparison& c) {
  j.begin_object();
  j.field("pass", c.pass());
  j.field("rel_frobenius", c.rel_frobenius());
  j.field("worst_ratio", c.worst_ratio());
  j.field("lse_compared", c.lse_compared);
  j.key("requests").begin_array();
  for (const dump::RequestResult& r : c.requests) {
    j.begin_object();
    j.field("request", r.request);
    j.field("padded", r.padded);
    j.field("draft_nodes", r.draft_nodes);
    j.field("prefix_len", r.prefix_len);
    j.field("pass", r.pass());
    j.field("rel_frobenius", r.rel_frobenius);
    j.field("max_abs", r.max_abs);
    j.field("max_ref", r.max_ref);
    j.field("elements_over", r.over);
    j.field("nonfinite", r.nonfinite);
    j.field("worst_ratio", r.worst_ratio);
    j.key("worst").begin_object();
    j.field("token", r.worst_token);
    j.field("head", r.worst_head);
    j.field("column", r.worst_column);
    j.field("got", r.worst_got);
    j.field("ref", r.worst_ref);
    j.field("bound", r.worst_bound);
    j.end_object();
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t k = 0; k < v.size(); ++k) f[k] = bf16_to_float(v[k]);
  return f;
}

}  // namespace

bool is_dump_path(const std::filesystem::path& path) { return path.extension() == ".safetensors"; }

int replay_dump(const std::filesystem::path& path, const DumpOptions& o, std::ostream& out) {
  int code = 0;
  dump::ServerDump d;
  if (!load(path, o, d, out, code)) return code;
  const auto start = std::chrono::steady_clock::now();
  const dump::KernelAssumptions assume;
  const dump::Reference ref = dump::reference(d, assume);
  const VerifyParams p = d.params();

  bool server_ok = true;
  dump::Comparison server;
  if (d.has_o()) {
    server = dump::compare(p, d.real_batch_size(), d.server_o(), d.server_lse(), ref.o, ref.lse,
                           ref.bound);
    server_ok = server.pass();
  }
  bool backend_ok = true;
  dump::Comparison backend_cmp;
  std::string backend_note;
  if (!o.backend.empty()) {
    BackendPtr owned = o.backend_object ? nullptr : make_backend(o.backend);
    Backend* b = o.backend_object ? o.backend_object : owned.get();
    VerifyParams bp = d.params();
    const Support s = b->can_implement(bp);
    if (!s) {
      backend_note = "backend " + o.backend + " cannot run this dump: " + s.reason;
      backend_ok = false;
    } else {
      b->run(bp);
      const int64_t n = d.total_tokens() * d.num_heads();
      std::vector<bf16> o_bits(static_cast<const bf16*>(bp.o_lat),
                               static_cast<const bf16*>(bp.o_lat) + n * kLatentDim);
      std::vector<float> lse(bp.lse, bp.lse + n);
      backend_cmp = dump::compare(p, d.real_batch_size(), widen(o_bits), lse, ref.o, ref.lse,
                                  ref.bound);
      backend_ok = backend_cmp.pass();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool ok = server_ok && backend_ok && (d.has_o() || !o.backend.empty());
  if (o.json) {
    JsonWriter j(out);
    j.begin_object();
    j.field("command", "replay");
    j.field("exit_code", int64_t{ok ? 0 : 1});
    j.field("file", path.string());
    j.field("pass", ok);
    j.field("requests", d.real_batch_size());
    j.field("padded_requests", d.batch_size() - d.real_batch_size());
    j.field("tokens", d.total_tokens());
    j.field("heads", d.num_heads());
    j.field("sm_scale", static_cast<double>(d.sm_scale()));
    j.field("model_gflop", model_flops(d) / 1e9);
    j.field("seconds", seconds);
    j.key("findings").begin_array();
    for (const dump::Finding& f : d.findings()) {
      j.begin_object().field("field", f.field).field("index", f.index).field("detail", f.detail);
      j.end_object();
    }
    j.end_array();
    if (d.has_o()) {
      j.key("server");
      json_comparison(j, server);
    }
    if (!o.backend.empty()) {
      j.field("backend", o.backend);
      if (!backend_note.empty()) {
        j.field("backend_error", backend_note);
      } else {
        j.key("backend_vs_model");
        json_comparison(j, backend_cmp);
      }
    }
    j.end_object();
    out << "\n";
    return ok ? 0 : 1;
  }
  out << "replay " << path.string() << ":\n";
  describe_dump(d, out);
  out << "  model: " << g(model_flops(d) / 1e9) << " GFLOP in " << g(seconds) << " s; bound: "
      << "bf16 in, fp32 accumulate (u_a = 2^-23, any order and tiling), bf16 P and out, up to "
      << assume.max_partials << " split partials (worst o coefficient " << g(ref.bound.worst_o_coeff)
      << " of sum w|v|, plus 2^-8 |ref|)\n";
  for (const dump::Finding& f : d.findings()) {
    out << "  finding: " << f.field;
    if (f.index >= 0) out << "[" << f.index << "]";
    out << ": " << f.detail << "\n";
  }
  if (d.has_o()) {
    out << "  server o" << (server.lse_compared ? " and lse" : " (no lse in the dump)")
        << " vs model:\n";
    for (const dump::RequestResult& r : server.requests) request_line(r, out);
    const dump::RequestResult* w = server.worst();
    out << "  server: " << (server_ok ? "PASS" : "FAIL") << ", rel_frob " << g(server.rel_frobenius())
        << " over real rows, worst element " << g(server.worst_ratio()) << "x its bound";
    if (w != nullptr) out << " at " << where(*w);
    out << "\n";
  } else {
    out << "  the dump holds no server o: nothing of the server's to compare\n";
  }
  if (!o.backend.empty()) {
    if (!backend_note.empty()) {
      out << "  " << backend_note << "\n";
    } else {
      out << "  backend " << o.backend << " vs model:\n";
      for (const dump::RequestResult& r : backend_cmp.requests) request_line(r, out);
      out << "  backend " << o.backend << ": " << (backend_ok ? "PASS" : "FAIL") << ", worst element "
          << g(backend_cmp.worst_ratio()) << "x its bound\n";
    }
  }
  if (!d.has_o() && o.backend.empty()) {
    out << "replay: nothing was compared (no server o and no --backend): not a pass\n";
  }
  return ok ? 0 : 1;
}

int diagnose_dump(const std::filesystem::path& path, const DumpOptions& options,
                  std::ostream& out) {
  DumpOptions o = options;
  o.command = "diagnose";
  int code = 0;
  dump::ServerDump d;
  if (!load(path, o, d, out, code)) return code;
  dump::Diagnosis dg;
  try {
    dg = dump::diagnose(d, dump::KernelAssumptions{}, o.readings);
  } catch (const InvalidInput& e) {
    bad_input(path, o, e.field(), e.index(), e.what(), out);
    return 2;
  }
  const int rc = dg.as_given.explains() ? 0 : 1;
  if (o.json) {
    JsonWriter j(out);
    j.begin_object();
    j.field("command", "diagnose");
    j.field("exit_code", int64_t{rc});
    j.field("file", path.string());
    j.field("as_given_explains", dg.as_given.explains());
    j.field("verdict", dg.verdict);
    j.key("readings").begin_array();
    auto one = [&](const dump::ReadingResult& r) {
      j.begin_object();
      j.field("name", r.info.name);
      j.field("spec_class", r.info.spec_class);
      j.field("description", r.info.description);
      j.field("applicable", r.applicable);
      if (!r.applicable) {
        j.field("why_not", r.why_not);
      } else {
        j.field("explains", r.explains());
        j.field("rel_frobenius", r.vs_server.rel_frobenius());
        j.field("worst_ratio", r.vs_server.worst_ratio());
        j.field("requests_within", r.requests_within);
        j.field("distance_from_given", r.distance_from_given);
      }
      j.end_object();
    };
    one(dg.as_given);
    for (const auto& r : dg.ranked) one(r);
    for (const auto& r : dg.not_applicable) one(r);
    j.end_array();
    j.end_object();
    out << "\n";
    return rc;
  }
  out << "diagnose " << path.string() << ":\n";
  describe_dump(d, out);
  for (const dump::Finding& f : d.findings()) {
    out << "  finding: " << f.field;
    if (f.index >= 0) out << "[" << f.index << "]";
    out << ": " << f.detail << "\n";
  }
  out << "  " << dg.verdict << "\n";
  // The questions people come with, each answered by the as-given reading against one wrong one.
  struct Question {
    const char* question;
    const char* reading;
    const char* given;
    const char* wrong;
  };
  const Question questions[] = {
      {"cache row order", "rope_first_cache", "latent-first [c | k_pe]", "rope-first [k_pe | c]"},
      {"query row order", "rope_first_query", "latent-first", "rope-first"},
      {"mask_indptr", "mask_indptr_shifted", "request i's mask at mask_indptr[i] (as given)",
       "one entry ahead: a [1:bs+1] slice read as offsets"},
      {"sm_scale", "sm_scale_576", "the dump's sm_scale", "576^-0.5"},
      {"mscale", "no_mscale", "with mscale^2", "192^-0.5 without mscale^2"},
  };
  out << "  questions:\n";
  for (const Question& q : questions) {
    const dump::ReadingResult* r = nullptr;
    for (const auto& x : dg.ranked) {
      if (x.info.name == q.reading) r = &x;
    }
    if (r == nullptr) continue;
    const bool g_ok = dg.as_given.explains(), w_ok = r->explains();
    out << "    " << q.question << ": ";
    if (r->distance_from_given <= 1) {
      out << "this dump cannot tell " << q.given << " from " << q.wrong;
    } else if (g_ok && !w_ok) {
      out << q.given << " (" << q.wrong << " is " << g(r->vs_server.worst_ratio())
          << "x the bound away)";
    } else if (w_ok && !g_ok) {
      out << q.wrong << ", NOT " << q.given << " (as given: " << g(dg.as_given.vs_server.worst_ratio())
          << "x the bound)";
    } else {
      out << "neither " << q.given << " (" << g(dg.as_given.vs_server.worst_ratio()) << "x) nor "
          << q.wrong << " (" << g(r->vs_server.worst_ratio()) << "x) explains it";
    }
    out << "\n";
  }
  out << "  readings, best explanation first (worst element / its bound over real rows; "
         "'same as given' = this dump cannot tell it apart):\n";
  auto line = [&](const dump::ReadingResult& r) {
    out << "    " << std::left << std::setw(31) << r.info.name << std::right;
    if (!r.applicable) {
      out << " n/a: " << r.why_not << "\n";
      return;
    }
    out << (r.explains() ? " EXPLAINS " : "          ") << "worst " << std::setw(9)
        << g(r.vs_server.worst_ratio()) << "x, rel_frob " << std::setw(9)
        << g(r.vs_server.rel_frobenius()) << ", " << r.requests_within << "/" << dg.real_requests
        << " requests";
    if (r.info.name != "as_given") {
      out << (r.distance_from_given <= 1 ? ", same as given on this dump" : "");
    }
    out << "  (" << r.info.description << ")\n";
  };
  line(dg.as_given);
  for (const auto& r : dg.ranked) line(r);
  for (const auto& r : dg.not_applicable) line(r);
  return rc;
}

}  // namespace mlaverify::cli

// `mlaverify selfcheck`: the reference model checked against itself and the CPU backend over the
// shipped presets, on a few generated batches. The first thing the main job runs.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iomanip>
#include <ostream>
#include <random>
#include <sstream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "model/config.h"
#include "props/properties.h"

namespace mlaverify::cli {
namespace {

// A batch of 1-4 requests with random recursive trees (parent[t] uniform in [0, t)) and prefix
// lengths at the edges that matter (0, 1, a tile +- 1) plus one arbitrary length. Sizes shrink as
// heads grow so that a TP1 DeepSeek-V3 case (128 heads) stays quick in double precision.
props::Case generated_case(const model::MlaConfig& cfg, int32_t heads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t scale = heads >= 64 ? 1 : 4;
  const int64_t edge_prefix[] = {0, 1, 63, 64, 65};
  props::Case c;
  c.num_heads = heads;
  c.sm_scale = cfg.sm_scale();
  c.seed = seed;
  c.num_splits = static_cast<int32_t>(uniform(1, 4));
  const int64_t bs = uniform(1, 4);
  for (int64_t i = 0; i < bs; ++i) {
    scenarios::RequestDesc r;
    const int64_t d = uniform(1, 6 * scale);
    r.parents.push_back(-1);
    for (int64_t t = 1; t < d; ++t) r.parents.push_back(static_cast<int32_t>(uniform(0, t - 1)));
    r.prefix_len = uniform(0, 1) ? edge_prefix[uniform(0, 4)] : uniform(2, 50 * scale);
    c.requests.push_back(std::move(r));
  }
  return c;
}

}  // namespace

int selfcheck(const SelfcheckOptions& options, std::ostream& out) {
  BackendPtr model = make_backend("model");
  BackendPtr cpu = make_backend("cpu");
  int failures = 0;
  int checks = 0;
  out << "mlaverify selfcheck: every property with the model as backend, and cpu vs model\n";
  out << std::left << std::setw(14) << "preset" << std::setw(4) << "tp" << std::setw(6) << "H"
      << std::setw(12) << "sm_scale" << std::setw(11) << "properties" << std::setw(16)
      << "cpu rel_frob" << "cpu max|lse err|\n";
  uint64_t seed = options.seed;
  for (const std::string& name : model::preset_names()) {
    const model::MlaConfig cfg = model::preset(name);
    for (int32_t tp : {1, 8}) {
      const int32_t heads = cfg.local_heads(tp);
      int passed = 0, total = 0;
      double worst_frob = 0, worst_lse = 0;
      for (int32_t k = 0; k < options.cases_per_config; ++k) {
        const props::Case c = generated_case(cfg, heads, seed++);
        for (const props::PropertyInfo& prop : props::all_properties()) {
          props::PropertyResult r = prop.fn(*model, c);
          if (r.skipped) continue;
          ++total;
          if (r.ok) {
            ++passed;
          } else {
            out << "  FAIL " << name << " tp" << tp << " " << prop.name << ": " << r.detail << "\n";
          }
        }
        props::PropertyResult r = props::check_vs_model(*cpu, c);
        ++total;
        if (r.ok) ++passed;
        else out << "  FAIL " << name << " tp" << tp << " cpu vs_model: " << r.detail << "\n";
        if (r.comparison) {
          worst_frob = std::max(worst_frob, r.comparison->rel_frobenius);
          worst_lse = std::max(worst_lse, r.comparison->max_lse_err);
        }
      }
      checks += total;
      failures += total - passed;
      std::ostringstream props_col, frob, lse;
      props_col << passed << "/" << total;
      frob << std::scientific << std::setprecision(2) << worst_frob;
      lse << std::scientific << std::setprecision(2) << worst_lse;
      out << std::left << std::setw(14) << name << std::setw(4) << tp << std::setw(6) << heads
          << std::setw(12) << std::setprecision(7) << std::fixed << cfg.sm_scale()
          << std::setw(11) << props_col.str() << std::setw(16) << frob.str() << lse.str() << "\n";
      out.unsetf(std::ios::floatfield);
    }
  }
  out << "selfcheck: " << checks - failures << " passed, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace mlaverify::cli

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

SelfcheckResult run_selfcheck(const SelfcheckOptions& options, std::ostream& out) {
  return run_selfcheck(*make_backend("model"), *make_backend("cpu"), options, out);
}

SelfcheckResult run_selfcheck(Backend& model, Backend& cpu, const SelfcheckOptions& options,
                              std::ostream& out) {
  SelfcheckResult result;
  // Per property: batches on which it ran (skipped is never green: each must run at least once).
  std::vector<int32_t> ran(props::all_properties().size(), 0);
  std::vector<std::string> skip_reason(ran.size());
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
        for (size_t p = 0; p < props::all_properties().size(); ++p) {
          const props::PropertyInfo& prop = props::all_properties()[p];
          props::PropertyResult r = prop.fn(model, c);
          if (r.skipped) {
            if (skip_reason[p].empty()) skip_reason[p] = r.detail;
            continue;
          }
          ++ran[p];
          ++total;
          if (r.ok) {
            ++passed;
          } else {
            result.failures.push_back(name + " tp" + std::to_string(tp) + " " +
                                      std::string(prop.name) + ": " + r.detail);
            out << "  FAIL " << result.failures.back() << "\n";
          }
        }
        props::PropertyResult r = props::check_vs_model(cpu, c);
        if (r.skipped) {
          result.not_verified.push_back("cpu vs_model skipped on " + name + " tp" +
                                        std::to_string(tp) + ": " + r.detail);
        } else {
          ++total;
          if (r.ok) {
            ++passed;
          } else {
            result.failures.push_back(name + " tp" + std::to_string(tp) +
                                      " cpu vs_model: " + r.detail);
            out << "  FAIL " << result.failures.back() << "\n";
          }
        }
        if (r.comparison) {
          worst_frob = std::max(worst_frob, r.comparison->rel_frobenius);
          worst_lse = std::max(worst_lse, r.comparison->max_lse_err);
        }
      }
      checks += total;
      failures += total - passed;
      result.rows.push_back(
          {name, tp, heads, cfg.sm_scale(), passed, total, worst_frob, worst_lse});
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
  for (size_t p = 0; p < ran.size(); ++p) {
    if (ran[p] == 0) {
      result.not_verified.push_back(std::string(props::all_properties()[p].name) +
                                    " never ran on the model (" + skip_reason[p] + ")");
    }
  }
  out << "selfcheck: " << checks - failures << " passed, " << failures << " failed\n";
  for (const std::string& line : result.not_verified) out << "NOT VERIFIED: " << line << "\n";
  result.checks = checks;
  result.failed = failures;
  result.exit_code = failures == 0 && result.not_verified.empty() ? kExitPass : kExitFail;
  return result;
}

int selfcheck(const SelfcheckOptions& options, std::ostream& out) {
  return run_selfcheck(options, out).exit_code;
}

}  // namespace mlaverify::cli

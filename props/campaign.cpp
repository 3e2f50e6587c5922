// Campaign driver: rapidcheck generators sampled directly (Gen::operator()(Random, size)), every
// property per case, greedy shrinking through simpler_cases, failures written as scenario files.
#include "props/campaign.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include "mlaverify/error.h"
#include "props/limits.h"

namespace mlaverify::props {

std::string FuzzReport::to_string() const {
  std::ostringstream os;
  os << "seed " << seed << ", " << cases_run << " cases";
  if (shard_count > 1) {
    os << " (shard " << shard_index << "/" << shard_count << " of " << cases_planned << ")";
  }
  os << " in " << seconds << " s\n";
  for (const auto& s : stats) {
    os << "  " << s.property << ": " << s.passed << " passed, " << s.failed << " failed, "
       << s.skipped << " skipped";
    if (!s.ran()) os << " (NEVER RAN" << (s.skip_reason.empty() ? "" : ": " + s.skip_reason) << ")";
    os << "\n";
  }
  for (const auto& f : failures) {
    os << "  FAILED " << f.property << " at case " << f.case_index << ", shrunk in "
       << f.shrink_steps << " steps (" << f.shrink_evals << " evals) to "
       << scenarios::summary(f.shrunk.spec) << "\n    " << f.detail << "\n";
    if (f.backend_lost) os << "    BACKEND LOST: " << f.lost_note << "\n";
    if (!f.file.empty()) os << "    written to " << f.file.string() << "\n";
    if (!f.lost_file.empty()) os << "    the case that lost it: " << f.lost_file.string() << "\n";
  }
  if (backend_lost()) {
    os << "  BACKEND LOST: the campaign stopped after case " << failures.back().case_index << " of "
       << cases_planned
       << (failures.back().file.empty() ? "" : "; replay the written case alone to reproduce it")
       << "\n";
  }
  return os.str();
}

ShrinkResult shrink_failure(Backend& backend, const PropertyInfo& property, const Case& failing,
                            const PropertyResult& first_result, int32_t max_evals) {
  ShrinkResult r{failing, first_result, 0, 0, false, "", std::nullopt};
  if (first_result.backend_lost) {  // every simpler case would "fail" too: nothing to learn
    r.lost = true;
    r.lost_detail = first_result.detail;
    return r;
  }
  bool progress = true;
  while (progress && r.evals < max_evals) {
    progress = false;
    for (const Case& candidate : simpler_cases(r.smallest, backend.capabilities())) {
      if (r.evals >= max_evals) break;
      ++r.evals;
      PropertyResult res = property.fn(backend, candidate);
      // A lost backend fails every case: that is no evidence about this one. Stop here with the
      // last case that failed on a live backend (the campaign stops too).
      if (res.backend_lost) {
        r.lost = true;
        r.lost_detail = res.detail;
        r.lost_case = candidate;
        return r;
      }
      if (!res.ok && !res.skipped) {
        r.smallest = candidate;
        r.result = std::move(res);
        ++r.steps;
        progress = true;
        break;
      }
    }
  }
  return r;
}

int32_t shard_cases(int32_t cases, int32_t index, int32_t count) {
  if (cases <= index) return 0;
  return (cases - index + count - 1) / count;
}

uint64_t case_identity(int32_t case_index, const Case& c) {
  scenarios::Scenario sc;
  sc.spec = c;
  const std::string text = std::to_string(case_index) + ":" + scenarios::to_json(sc);
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

Capabilities intersect(const Capabilities& a, const Capabilities& b) {
  Capabilities c = b;
  c.mask_formats &= a.mask_formats;
  c.mask_indptr_conventions &= a.mask_indptr_conventions;
  c.kv_dtypes &= a.kv_dtypes;
  c.q_dtypes &= a.q_dtypes;
  c.o_dtypes &= a.o_dtypes;
  c.kv_layouts &= a.kv_layouts;
  c.draft_sources &= a.draft_sources;
  c.kv_indexings &= a.kv_indexings;
  c.page_sizes &= a.page_sizes;
  c.padded_kv_rows = a.padded_kv_rows && b.padded_kv_rows;
  c.strided_q = a.strided_q && b.strided_q;
  c.strided_o = a.strided_o && b.strided_o;
  c.padded_extend_rows = a.padded_extend_rows && b.padded_extend_rows;
  c.balanced_plan = a.balanced_plan && b.balanced_plan;
  c.max_heads = std::min(a.max_heads, b.max_heads);
  c.max_draft = std::min(a.max_draft, b.max_draft);
  c.max_prefix = std::min(a.max_prefix, b.max_prefix);
  return c;
}

namespace {

// One clear line when a declaration leaves nothing to generate.
void require_generable(const Capabilities& k) {
  auto need = [](uint32_t set, const char* field) {
    if (set == 0) throw InvalidInput(std::string("capabilities.") + field, -1, "declares no value");
  };
  need(k.mask_formats, "mask_formats");
  need(k.kv_dtypes, "kv_dtypes");
  need(k.q_dtypes, "q_dtypes");
  need(k.o_dtypes, "o_dtypes");
  need(k.kv_layouts, "kv_layouts");
  need(k.draft_sources, "draft_sources");
  need(k.kv_indexings, "kv_indexings");
  if (k.max_heads < 1) throw InvalidInput("capabilities.max_heads", -1, "must be >= 1");
  if (k.max_draft < 1) throw InvalidInput("capabilities.max_draft", -1, "must be >= 1");
  if (k.max_prefix < 0) throw InvalidInput("capabilities.max_prefix", -1, "must be >= 0");
}

void check_shard(const CampaignOptions& o) {
  if (o.shard_count < 1) {
    throw InvalidInput("shard", -1, "shard count " + std::to_string(o.shard_count) + " < 1");
  }
  if (o.shard_index < 0 || o.shard_index >= o.shard_count) {
    throw InvalidInput("shard", o.shard_index,
                       "shard index outside [0, " + std::to_string(o.shard_count) + ")");
  }
}

// The generator options of a campaign on `backend`: what the options allow, narrowed by what the
// backend declares.
GenOptions campaign_gen_options(const Backend& backend, const CampaignOptions& o) {
  GenOptions g = o.gen;
  g.caps = intersect(o.gen.caps, backend.capabilities());
  require_generable(g.caps);
  return g;
}

// Draws a campaign's cases: case n comes from the n-th split of the seed's stream whatever the
// other cases did and whichever shard runs it (the split happens for every n, run here or not);
// `visit(n, case)` is called for this shard's cases in order and stops the campaign by returning
// false. run_campaign and campaign_coverage both draw through it, so they see the same cases.
template <class Visit>
void draw_campaign(const GenOptions& gen_options, const CampaignOptions& o, Visit&& visit) {
  rc::Gen<Case> gen = gen_case(gen_options);
  rc::Random random(o.seed);
  for (int32_t n = 0; n < o.cases; ++n) {
    rc::Random stream = random.split();
    if (n % o.shard_count != o.shard_index) continue;
    if (!visit(n, gen(stream, rc::kNominalSize).value())) return;
  }
}

}  // namespace

Coverage campaign_coverage(const Backend& backend, const CampaignOptions& o) {
  check_shard(o);
  const GenOptions gen_options = campaign_gen_options(backend, o);
  Coverage coverage(gen_options.caps);
  draw_campaign(gen_options, o, [&](int32_t, const Case& c) {
    coverage.add(c);
    return true;
  });
  return coverage;
}

FuzzReport run_campaign(Backend& backend, const CampaignOptions& o) {
  check_shard(o);
  const auto start = std::chrono::steady_clock::now();
  std::vector<const PropertyInfo*> selected;
  if (o.properties.empty()) {
    for (const auto& p : all_properties()) selected.push_back(&p);
  } else {
    for (const auto& name : o.properties) selected.push_back(&property_by_name(name));
  }
  FuzzReport report;
  report.seed = o.seed;
  report.cases_planned = o.cases;
  report.shard_index = o.shard_index;
  report.shard_count = o.shard_count;
  const int32_t planned = shard_cases(o.cases, o.shard_index, o.shard_count);
  for (const auto* p : selected) report.stats.push_back({std::string(p->name), 0, 0, 0, ""});
  std::vector<bool> dead(selected.size(), false);
  const std::string label = o.backend_label.empty() ? backend.name() : o.backend_label;

  const GenOptions gen_options = campaign_gen_options(backend, o);
  report.coverage = Coverage(gen_options.caps);
  draw_campaign(gen_options, o, [&](int32_t n, const Case& c) {
    ++report.cases_run;
    report.case_digest += case_identity(n, c);
    report.coverage.add(c);
    if (o.on_generated) o.on_generated(n, c);
    bool any_failed = false;
    for (size_t k = 0; k < selected.size(); ++k) {
      if (dead[k]) continue;
      PropertyResult res = selected[k]->fn(backend, c);
      PropertyStats& st = report.stats[k];
      if (res.skipped) {
        if (st.skipped++ == 0) st.skip_reason = res.detail;
        continue;
      }
      if (res.ok) {
        ++st.passed;
        continue;
      }
      ++st.failed;
      dead[k] = true;
      any_failed = true;
      // After a lost backend (a CUDA kernel fault) shrink_failure keeps what it has, and the
      // campaign ends after this case (below).
      ShrinkResult sh = shrink_failure(backend, *selected[k], c, res, o.max_shrink_evals);
      Failure f;
      f.property = std::string(selected[k]->name);
      f.case_index = n + 1;
      f.original = c;
      f.shrunk.spec = sh.smallest;
      f.shrunk.property = f.property;
      f.shrunk.backend = label;
      f.detail = sh.result.detail;
      f.shrunk.note = "found by run_campaign seed " + std::to_string(o.seed) + " at case " +
                      std::to_string(n + 1) + ", shrunk in " + std::to_string(sh.steps) +
                      " steps; " + sh.result.detail;
      if (sh.lost) {
        f.backend_lost = true;
        f.lost_note = res.backend_lost
                          ? std::string("not shrunk: the backend was lost on this case")
                          : "shrinking stopped at evaluation " + std::to_string(sh.evals) +
                                ": the backend was lost on a simpler case (" + sh.lost_detail +
                                ")";
        f.shrunk.note += "; " + f.lost_note + "; the campaign stopped here";
      }
      f.shrink_evals = sh.evals;
      f.shrink_steps = sh.steps;
      if (!o.out_dir.empty()) {
        std::string safe_label;
        for (char ch : label) safe_label += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
        f.file = o.out_dir / (f.property + "-" + safe_label + "-" + std::to_string(o.seed) + "-" +
                              std::to_string(n + 1) + ".json");
        scenarios::save_scenario(f.file, f.shrunk);
        if (sh.lost_case) {
          scenarios::Scenario lost = f.shrunk;
          lost.spec = *sh.lost_case;
          lost.note = "the case on which the backend was lost while shrinking the failure of " +
                      f.file.filename().string() + " (" + sh.lost_detail + ")";
          f.lost_file = f.file;
          f.lost_file.replace_extension();
          f.lost_file += "-lost.json";
          scenarios::save_scenario(f.lost_file, lost);
        }
      }
      report.failures.push_back(std::move(f));
      if (report.backend_lost()) break;
    }
    if (o.on_case) o.on_case(report.cases_run, planned);
    if (report.backend_lost()) return false;
    return !(any_failed && o.stop_at_first_failure);
  });
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

PropertyResult replay(const scenarios::Scenario& scenario, Backend& backend) {
  scenarios::validate_case(scenario.spec);
  return property_by_name(scenario.property).fn(backend, scenario.spec);
}

uint64_t seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("MLAV_SEED");
  if (!s || !*s) return fallback;
  char* end = nullptr;
  uint64_t v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0') throw InvalidInput("MLAV_SEED", -1, "not an unsigned integer");
  return v;
}

int32_t cases_from_env(int32_t fallback) {
  const char* s = std::getenv("MLAV_CASES");
  if (!s || !*s) return fallback;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > kMaxCampaignCases) {
    throw InvalidInput("MLAV_CASES", -1,
                       "need an integer in 1.." + std::to_string(kMaxCampaignCases));
  }
  return static_cast<int32_t>(v);
}

}  // namespace mlaverify::props

// `mlaverify merge`: the reports of a campaign's N shards combined into the campaign's report,
// judged as an unsharded run is. Reports that do not make exactly one campaign are bad input.
#include <algorithm>
#include <map>
#include <ostream>

#include "cli/commands.h"
#include "cli/json_io.h"
#include "mlaverify/error.h"

namespace mlaverify::cli {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

CampaignReport merge_reports(const std::vector<CampaignReport>& shards,
                             const std::vector<std::string>& names) {
  if (shards.empty()) throw InvalidInput("reports", -1, "no shard report given");
  const CampaignReport& first = shards.front();
  // The campaign's identity: every shard must agree with the first on all of it.
  auto differs = [&](size_t i, const std::string& field, const std::string& mine,
                     const std::string& theirs) {
    throw InvalidInput(field, -1,
                       "'" + mine + "' in " + names[i] + " but '" + theirs + "' in " + names[0] +
                           ": not shards of one campaign");
  };
  std::map<int32_t, size_t> seen;  // shard index -> report
  for (size_t i = 0; i < shards.size(); ++i) {
    const CampaignReport& s = shards[i];
    if (!s.merged_shards.empty()) {
      throw InvalidInput("merged_shards", -1, names[i] + " is already a merge of shards");
    }
    if (s.backend != first.backend) differs(i, "backend", s.backend, first.backend);
    if (s.seed != first.seed) {
      differs(i, "seed", std::to_string(s.seed), std::to_string(first.seed));
    }
    if (s.cases != first.cases) {
      differs(i, "cases", std::to_string(s.cases), std::to_string(first.cases));
    }
    if (s.shard_count != first.shard_count) {
      differs(i, "shard_count", std::to_string(s.shard_count), std::to_string(first.shard_count));
    }
    if (s.properties != first.properties) {
      differs(i, "properties", join(s.properties), join(first.properties));
    }
    if (s.shard_index < 0 || s.shard_index >= s.shard_count) {
      throw InvalidInput("shard_index", s.shard_index, names[i] + ": outside [0, shard_count)");
    }
    if (auto [it, fresh] = seen.emplace(s.shard_index, i); !fresh) {
      throw InvalidInput("shard_index", s.shard_index,
                         "given twice: " + names[it->second] + " and " + names[i]);
    }
    const int32_t share = props::shard_cases(s.cases, s.shard_index, s.shard_count);
    // A shard whose backend was lost stopped early, and says so; any other short shard is not
    // the whole of its share.
    if (s.backend_lost ? s.cases_run > share : s.cases_run != share) {
      throw InvalidInput("cases_run", -1,
                         std::to_string(s.cases_run) + " in " + names[i] + ", but shard " +
                             std::to_string(s.shard_index) + "/" + std::to_string(s.shard_count) +
                             " of " + std::to_string(s.cases) + " cases has " +
                             std::to_string(share) + " (an interrupted run?)");
    }
    if (s.stats.size() != s.properties.size()) {
      throw InvalidInput("properties", -1,
                         names[i] + " has stats for " + std::to_string(s.stats.size()) +
                             " properties, " + "selects " + std::to_string(s.properties.size()));
    }
  }
  // Every shard index is in [0, shard_count) (checked above), so the shards are complete exactly
  // when there are shard_count distinct ones; the message names the first few missing.
  if (static_cast<int64_t>(seen.size()) != first.shard_count) {
    std::string missing;
    int32_t listed = 0;
    for (int32_t k = 0; k < first.shard_count && listed < 8; ++k) {
      if (!seen.contains(k)) missing += (listed++ ? ", " : "") + std::to_string(k);
    }
    const int64_t absent = first.shard_count - static_cast<int64_t>(seen.size());
    if (absent > listed) missing += " and " + std::to_string(absent - listed) + " more";
    throw InvalidInput("shard_index", -1,
                       "missing shard(s) " + missing + " of " + std::to_string(first.shard_count));
  }

  CampaignReport m;
  m.backend = first.backend;
  m.seed = first.seed;
  m.cases = first.cases;
  m.properties = first.properties;
  m.shard_index = 0;
  m.shard_count = first.shard_count;
  for (const auto& [k, i] : seen) m.merged_shards.push_back(k);
  m.stats = first.stats;
  for (props::PropertyStats& st : m.stats) st = {st.property, 0, 0, 0, ""};
  for (const CampaignReport& s : shards) {
    m.backend_lost = m.backend_lost || s.backend_lost;
    m.cases_run += s.cases_run;
    m.seconds += s.seconds;
    m.case_digest += s.case_digest;
    for (size_t p = 0; p < m.stats.size(); ++p) {
      props::PropertyStats& st = m.stats[p];
      st.passed += s.stats[p].passed;
      st.failed += s.stats[p].failed;
      st.skipped += s.stats[p].skipped;
      if (st.skip_reason.empty()) st.skip_reason = s.stats[p].skip_reason;
    }
    m.failures.insert(m.failures.end(), s.failures.begin(), s.failures.end());
  }
  std::stable_sort(m.failures.begin(), m.failures.end(),
                   [](const auto& a, const auto& b) { return a.case_index < b.case_index; });
  // Coverage: the shards' rows summed when every shard has the same rows (one campaign, one
  // backend, one build); else none, since a count over part of the campaign would mislead.
  bool same_rows = true;
  for (const CampaignReport& s : shards) {
    same_rows = same_rows && !s.coverage.empty() && s.coverage.size() == first.coverage.size();
    for (size_t k = 0; same_rows && k < s.coverage.size(); ++k) {
      const props::CoverageRow &a = s.coverage[k], &b = first.coverage[k];
      same_rows = a.field == b.field && a.value == b.value && a.accepted == b.accepted;
    }
  }
  if (same_rows) {
    m.coverage = first.coverage;
    for (props::CoverageRow& row : m.coverage) row.cases = 0;
    for (const CampaignReport& s : shards)
      for (size_t k = 0; k < s.coverage.size(); ++k) m.coverage[k].cases += s.coverage[k].cases;
    m.coverage_missing = props::coverage_missing(m.coverage);
  }
  judge(m);
  return m;
}

CampaignReport run_merge(const MergeOptions& options, std::ostream& out) {
  std::vector<CampaignReport> shards;
  std::vector<std::string> names;
  for (const std::filesystem::path& p : options.reports) {
    shards.push_back(load_report(p));
    names.push_back(p.string());
  }
  CampaignReport m = merge_reports(shards, names);
  out << "mlaverify merge: " << shards.size() << " shard reports of backend " << m.backend
      << ", seed " << m.seed << ", " << m.cases << " cases\n";
  print_campaign(m, out);
  return m;
}

}  // namespace mlaverify::cli

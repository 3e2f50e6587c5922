// `mlaverify fuzz`: a fuzz campaign (or one shard of it) against a named backend, summarised as a
// CampaignReport, which `merge` also produces from shard reports and judges the same way.
#include <algorithm>
#include <charconv>
#include <optional>
#include <ostream>
#include <string>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "mlaverify/error.h"
#include "props/campaign.h"
#include "scenarios/scenario.h"

namespace mlaverify::cli {

void parse_shard(const std::string& text, int32_t& index, int32_t& count) {
  const size_t slash = text.find('/');
  auto number = [&](std::string_view part, int32_t& value) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    return ec == std::errc() && end == part.data() + part.size() && !part.empty();
  };
  int32_t k = 0, n = 0;
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), k) ||
      !number(std::string_view(text).substr(slash + 1), n)) {
    throw InvalidInput("shard", -1, "'" + text + "' is not K/N (e.g. 3/8: shard 3 of 8, from 0)");
  }
  if (n < 1 || n > kMaxShards || k < 0 || k >= n) {
    throw InvalidInput("shard", -1,
                       "'" + text + "': need 0 <= K < N <= " + std::to_string(kMaxShards));
  }
  index = k;
  count = n;
}

CampaignReport run_fuzz(const FuzzOptions& options, std::ostream& out) {
  BackendPtr backend = make_backend_or_mutant(options.backend);
  return run_fuzz(*backend, options, out);
}

CampaignReport run_fuzz(Backend& backend, const FuzzOptions& options, std::ostream& out) {
  props::CampaignOptions campaign;
  campaign.cases = options.cases;
  campaign.seed = options.seed;
  campaign.properties = options.properties;
  campaign.out_dir = options.out_dir;
  campaign.shard_index = options.shard_index;
  campaign.shard_count = options.shard_count;
  const int32_t planned =
      props::shard_cases(options.cases, options.shard_index, options.shard_count);
  if (planned == 0) {
    throw InvalidInput("shard", options.shard_index,
                       "a campaign of " + std::to_string(options.cases) + " cases has no case " +
                           "for shard " + std::to_string(options.shard_index) + "/" +
                           std::to_string(options.shard_count) + " (need N <= --cases)");
  }
  // Resolve the selection first, so that an unknown name is bad input before any case runs.
  std::vector<std::string> selected;
  if (options.properties.empty()) {
    for (const props::PropertyInfo& p : props::all_properties()) selected.emplace_back(p.name);
  } else {
    for (const std::string& name : options.properties) {
      selected.emplace_back(props::property_by_name(name).name);
    }
  }
  out << "mlaverify fuzz: backend " << backend.name() << ", " << options.cases << " cases, seed "
      << options.seed;
  if (options.shard_count > 1) {
    out << ", shard " << options.shard_index << "/" << options.shard_count << " (" << planned
        << " cases: i % " << options.shard_count << " == " << options.shard_index << ")";
  }
  out << " (replay the campaign with --seed " << options.seed << ")\n";
  std::optional<Progress> progress;
  if (options.progress) progress.emplace(*options.progress, options.progress_bar);
  campaign.on_case = [&](int32_t done, int32_t total) {
    if (progress) progress->update(done, total);
  };
  const props::FuzzReport fr = props::run_campaign(backend, campaign);

  CampaignReport r;
  r.backend = options.backend;
  r.seed = options.seed;
  r.cases = options.cases;
  r.properties = selected;
  r.shard_index = options.shard_index;
  r.shard_count = options.shard_count;
  r.cases_run = fr.cases_run;
  r.seconds = fr.seconds;
  r.case_digest = fr.case_digest;
  r.stats = fr.stats;
  r.backend_lost = fr.backend_lost();
  for (const props::Failure& f : fr.failures) {
    r.failures.push_back({f.property, f.case_index, f.shrink_steps, f.shrink_evals,
                          scenarios::summary(f.shrunk.spec), f.detail, f.file.string()});
  }
  r.coverage = fr.coverage.rows();
  r.coverage_missing = fr.coverage.missing();
  if (options.coverage) r.coverage_table = fr.coverage.to_string();
  judge(r);
  print_campaign(r, out);
  return r;
}

int fuzz(const FuzzOptions& options, std::ostream& out) { return run_fuzz(options, out).exit_code; }

}  // namespace mlaverify::cli

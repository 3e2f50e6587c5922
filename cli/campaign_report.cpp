// A campaign report's verdict and its human-readable summary: shared by `fuzz`, `merge` and the
// report loader (cli/json_io.cpp), and small enough to build into the report fuzzer
// (fuzz/report_fuzzer.cpp) without the backends.
#include <ostream>
#include <string>

#include "cli/commands.h"

namespace mlaverify::cli {

void judge(CampaignReport& r) {
  r.not_verified.clear();
  for (const props::PropertyStats& s : r.stats) {
    // Skipped is never green: a property the backend refused on every case checked nothing.
    // (After a lost backend the properties not reached are not "never ran": the run failed.)
    if (!s.ran() && !r.backend_lost) {
      r.not_verified.push_back(s.property + " never ran: " + std::to_string(s.skipped) + " of " +
                               std::to_string(r.cases_run) + " cases skipped" +
                               (s.skip_reason.empty() ? "" : " (" + s.skip_reason + ")"));
    }
  }
  r.exit_code = !r.failures.empty() || !r.not_verified.empty() ? kExitFail : kExitPass;
}

void print_campaign(const CampaignReport& r, std::ostream& out) {
  out << "seed " << r.seed << ", " << r.cases_run << " cases";
  if (!r.merged_shards.empty()) {
    out << " (" << r.merged_shards.size() << " shards merged)";
  } else if (r.shard_count > 1) {
    out << " (shard " << r.shard_index << "/" << r.shard_count << " of " << r.cases << ")";
  }
  out << " in " << r.seconds << " s\n";
  for (const props::PropertyStats& s : r.stats) {
    out << "  " << s.property << ": " << s.passed << " passed, " << s.failed << " failed, "
        << s.skipped << " skipped" << (s.ran() ? "" : "  NEVER RAN") << "\n";
  }
  for (const CampaignReport::FailureSummary& f : r.failures) {
    out << "FAILED " << f.property << " at case " << f.case_index << ", shrunk in "
        << f.shrink_steps << " steps to " << f.shrunk << ": " << f.detail << "\n";
    if (!f.file.empty()) out << "  scenario written to " << f.file << "\n";
  }
  int32_t skips = 0;
  for (const props::PropertyStats& s : r.stats) skips += s.skipped;
  if (skips > 0) {
    out << "note: " << skips << " property runs skipped: the backend refused cases inside what it "
        << "declares (its capabilities and can_implement disagree)\n";
  }
  if (!r.coverage_table.empty()) out << r.coverage_table;
  if (!r.coverage_missing.empty()) {
    out << "coverage: " << r.coverage_missing.size()
        << " accepted values no case took (more --cases, or a generator hole):";
    for (const std::string& m : r.coverage_missing) out << " " << m << ";";
    out << "\n";
  }
  if (r.backend_lost) {
    out << "BACKEND LOST: the backend could run nothing more after a failure (a CUDA kernel "
        << "fault loses the context); " << (r.merged_shards.empty() ? "the run" : "a shard")
        << " stopped there, " << r.cases_run << " of " << r.cases
        << " cases run. Replay the failing scenario alone to reproduce it\n";
  }
  for (const std::string& line : r.not_verified) out << "NOT VERIFIED: " << line << "\n";
  out << "verdict: "
      << (!r.failures.empty()       ? "FAIL (" + std::to_string(r.failures.size()) + " failure(s))"
          : !r.not_verified.empty() ? std::string("NOT VERIFIED (a property never ran)")
                                    : std::string("pass"))
      << ", exit " << r.exit_code << "\n";
}

}  // namespace mlaverify::cli

// libFuzzer harness for the fuzz report loader (cli/json_io.h parse_report, behind load_report)
// and `merge` (merge_reports), which a sharded campaign's reports reach. The input is up to four
// report texts separated by byte 0x1e. Each is either rejected with InvalidInput naming a field
// or accepted; an accepted report writes back (the `fuzz --json` document) to text that reads
// back to a report with the same document; two or more accepted reports either are rejected by
// merge_reports with InvalidInput, or merge into a complete campaign (cases_run == cases, or at
// most that when a shard's backend was lost, and then the merge's too; per-property counts the
// sums of the shards', failures all of theirs, the verdict as judge gives it). Anything else, or
// a sanitizer report, is a crash.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/json_io.h"
#include "fuzz/fuzz_support.h"

const char* const mlaverify::fuzzing::kHarness = "report_fuzzer";

namespace {

using mlaverify::cli::CampaignReport;
using mlaverify::fuzzing::accepted;
using mlaverify::fuzzing::fail;

// The report's --json document: every field the reader reads, and the verdict it recomputes.
std::string document(const CampaignReport& r) {
  std::ostringstream out;
  mlaverify::cli::write_json("fuzz", r, out);
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> texts;
  for (size_t at = 0; texts.size() < 4;) {
    const size_t end = input.find('\x1e', at);
    texts.push_back(input.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  std::vector<CampaignReport> shards;
  std::vector<std::string> names;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string name = "report[" + std::to_string(i) + "]";
    std::optional<CampaignReport> r =
        accepted([&] { return mlaverify::cli::parse_report(texts[i], name); }, "report");
    if (!r) continue;
    const std::string written = document(*r);
    const std::optional<CampaignReport> back = accepted(
        [&] { return mlaverify::cli::parse_report(written, name + " written back"); }, "report");
    if (!back) fail("a written report does not read back", written.substr(0, 400));
    if (document(*back) != written) fail("a report changed through write and read", r->backend);
    shards.push_back(std::move(*r));
    names.push_back(name);
  }
  if (shards.size() < 2) return 0;
  const std::optional<CampaignReport> m =
      accepted([&] { return mlaverify::cli::merge_reports(shards, names); }, "merge");
  if (!m) return 0;
  bool lost = false;
  for (const CampaignReport& s : shards) lost = lost || s.backend_lost;
  if (m->backend_lost != lost) fail("a merge's backend_lost is not its shards'", m->backend);
  if (lost ? m->cases_run > m->cases : m->cases_run != m->cases)
    fail("a merge that is not the whole campaign", m->backend);
  for (size_t p = 0; p < m->stats.size(); ++p) {
    int64_t passed = 0, failed = 0, skipped = 0;
    for (const CampaignReport& s : shards) {
      passed += s.stats[p].passed, failed += s.stats[p].failed, skipped += s.stats[p].skipped;
    }
    if (m->stats[p].passed != passed || m->stats[p].failed != failed ||
        m->stats[p].skipped != skipped)
      fail("merged counts are not the shards' sums", m->stats[p].property);
  }
  size_t failures = 0;
  for (const CampaignReport& s : shards) failures += s.failures.size();
  if (m->failures.size() != failures) fail("a merge lost or made failures", m->backend);
  const int verdict = !m->failures.empty() || !m->not_verified.empty() ? mlaverify::cli::kExitFail
                                                                       : mlaverify::cli::kExitPass;
  if (m->exit_code != verdict) fail("a merge's verdict is not judge's", m->backend);
  return 0;
}

// libFuzzer harness for the fuzz report loader (cli/json_io.h parse_report, behind load_report)
// and `merge` (merge_reports), which a sharded campaign's reports reach. The input is up to four
// report texts separated by byte 0x1e. Each is either rejected with InvalidInput naming a field
// or accepted; an accepted report writes back (the `fuzz --json` document) to text that reads
// back to the same report; two or more accepted reports either are rejected by merge_reports with
// InvalidInput, or merge into a complete campaign (cases_run == cases, per-property counts the
// sums of the shards', failures all of theirs, the verdict as judge gives it). Anything else, or a
// sanitizer report, is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/json_io.h"
#include "mlaverify/error.h"

namespace {

using mlaverify::InvalidInput;
using mlaverify::cli::CampaignReport;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "report_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

template <typename F>
std::optional<CampaignReport> accepted(F&& read, const char* what) {
  try {
    return read();
  } catch (const InvalidInput& e) {
    if (e.field().empty()) fail("a rejection that names no field", e.what());
    return std::nullopt;
  } catch (const std::exception& e) {
    fail(what, e.what());
  } catch (...) {
    fail(what, "a non-std exception");
  }
}

void same(const CampaignReport& a, const CampaignReport& b) {
  bool ok = a.backend == b.backend && a.seed == b.seed && a.cases == b.cases &&
            a.properties == b.properties && a.shard_index == b.shard_index &&
            a.shard_count == b.shard_count && a.merged_shards == b.merged_shards &&
            a.cases_run == b.cases_run && a.seconds == b.seconds &&
            a.case_digest == b.case_digest && a.stats.size() == b.stats.size() &&
            a.failures.size() == b.failures.size() && a.coverage.size() == b.coverage.size() &&
            a.exit_code == b.exit_code && a.not_verified == b.not_verified &&
            a.coverage_missing == b.coverage_missing;
  for (size_t i = 0; ok && i < a.stats.size(); ++i) {
    const auto &x = a.stats[i], &y = b.stats[i];
    ok = x.property == y.property && x.passed == y.passed && x.failed == y.failed &&
         x.skipped == y.skipped && x.skip_reason == y.skip_reason;
  }
  for (size_t i = 0; ok && i < a.failures.size(); ++i) {
    const auto &x = a.failures[i], &y = b.failures[i];
    ok = x.property == y.property && x.case_index == y.case_index &&
         x.shrink_steps == y.shrink_steps && x.shrink_evals == y.shrink_evals &&
         x.shrunk == y.shrunk && x.detail == y.detail && x.file == y.file;
  }
  for (size_t i = 0; ok && i < a.coverage.size(); ++i) {
    const auto &x = a.coverage[i], &y = b.coverage[i];
    ok = x.field == y.field && x.value == y.value && x.accepted == y.accepted && x.cases == y.cases;
  }
  if (!ok) fail("a report changed through write and read", a.backend);
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
    std::optional<CampaignReport> r = accepted(
        [&] { return mlaverify::cli::parse_report(texts[i], name); }, "the loader threw");
    if (!r) continue;
    std::ostringstream out;
    mlaverify::cli::write_json("fuzz", *r, out);
    const std::optional<CampaignReport> back = accepted(
        [&] { return mlaverify::cli::parse_report(out.str(), name + " written back"); },
        "the loader threw on a written report");
    if (!back) fail("a written report does not read back", out.str().substr(0, 400));
    same(*r, *back);
    shards.push_back(std::move(*r));
    names.push_back(name);
  }
  if (shards.size() < 2) return 0;
  const std::optional<CampaignReport> m =
      accepted([&] { return mlaverify::cli::merge_reports(shards, names); }, "merge threw");
  if (!m) return 0;
  if (m->cases_run != m->cases) fail("a merge that is not the whole campaign", m->backend);
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

// The CLI's commands as plain functions (CLI11 stays in main.cpp, JSON in json_io.cpp): each
// run_* returns a result struct that main.cpp prints as JSON with --json; the human-readable
// summary goes to `out` as the command runs. Every result carries the process exit code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "mlaverify/backend.h"
#include "props/campaign.h"
#include "props/limits.h"

namespace mlaverify::cli {

// Exit codes, the same for every command (main.cpp's --help footer and the README say so too).
using props::kMaxCampaignCases;  // props/limits.h: --cases, --shard K/N, report files
using props::kMaxShards;
inline constexpr int kExitPass = 0;      // everything asked for was checked, and it held
inline constexpr int kExitFail = 1;      // a mismatch; or nothing was verified (every case of a
                                         // property, or every scenario, skipped by the backend)
inline constexpr int kExitBadInput = 2;  // usage error, unknown backend/property/mutant,
                                         // unreadable or malformed file, folder without files,
                                         // shard reports that do not make one campaign

// ---- selfcheck ----------------------------------------------------------------------------------

struct SelfcheckOptions {
  int32_t cases_per_config = 2;  // generated batches per (preset, tp)
  uint64_t seed = 20261129;
};
struct SelfcheckRow {
  std::string preset;
  int32_t tp = 1;
  int32_t heads = 0;
  double sm_scale = 0;
  int32_t passed = 0;
  int32_t total = 0;
  double worst_rel_frobenius = 0;  // cpu vs model
  double worst_lse_err = 0;
};
struct SelfcheckResult {
  std::vector<SelfcheckRow> rows;
  std::vector<std::string> failures;      // one line each
  std::vector<std::string> not_verified;  // properties that never ran on any batch
  int32_t checks = 0;
  int32_t failed = 0;
  int exit_code = kExitPass;
};
// The model checks itself over every preset at TP1 and TP8: every property of the suite with the
// model as the backend (chain == causal, draft source, slot permutation, representations, batch
// independence, metadata), and the CPU backend against it. Exit 0 when all hold and every
// property ran at least once.
SelfcheckResult run_selfcheck(const SelfcheckOptions& options, std::ostream& out);
// The same with the two backends given (tests: one that refuses everything must not pass).
SelfcheckResult run_selfcheck(Backend& model, Backend& cpu, const SelfcheckOptions& options,
                              std::ostream& out);
int selfcheck(const SelfcheckOptions& options, std::ostream& out);

// ---- fuzz and merge -----------------------------------------------------------------------------

struct FuzzOptions {
  std::string backend = "cpu";          // model, cpu, cuda, or mutant:<name> (over cpu)
  int32_t cases = 100;
  uint64_t seed = 20261129;
  std::vector<std::string> properties;  // empty: all
  std::filesystem::path out_dir;        // shrunk failures as scenario files; empty: not written
  int32_t shard_index = 0;              // --shard K/N: run the cases i with i % N == K
  int32_t shard_count = 1;
  bool progress_bar = false;         // redraw one line on `progress` (a terminal)
  bool coverage = false;             // print the whole coverage table (props/coverage.h)
  std::ostream* progress = nullptr;  // progress output (lines or bar); null: none
};

// What a fuzz run (or a merge of shard runs) established, as written to --report and --json.
// The first block identifies the campaign: the shards of one campaign agree on all of it.
struct CampaignReport {
  std::string backend;  // as named on the command line ("cpu", "mutant:x")
  uint64_t seed = 0;
  int32_t cases = 0;                    // the whole campaign's
  std::vector<std::string> properties;  // the selected ones, resolved (never empty)
  int32_t shard_index = 0;
  int32_t shard_count = 1;
  std::vector<int32_t> merged_shards;  // a merge: the shard indices combined; else empty

  int32_t cases_run = 0;
  // The backend was lost (props::FuzzReport::backend_lost(): a CUDA kernel fault): the run stopped
  // after its failing case, so cases_run may fall short of the run's share. A merge: any shard's.
  bool backend_lost = false;
  double seconds = 0;        // a merge: summed over the shards
  uint64_t case_digest = 0;  // props::FuzzReport::case_digest (summed in a merge)
  std::vector<props::PropertyStats> stats;
  struct FailureSummary {
    std::string property;
    int32_t case_index = 0;  // 1-based campaign index, as in props::Failure
    int32_t shrink_steps = 0;
    int32_t shrink_evals = 0;
    std::string shrunk;  // scenarios::summary of the shrunk case
    std::string detail;
    std::string file;  // scenario written, or empty
  };
  std::vector<FailureSummary> failures;

  std::vector<std::string> not_verified;  // why the run is not green although nothing failed
  // Coverage (props/coverage.h): a row per field value with the cases that took it, the accepted
  // values no case took, and (--coverage) the printed table. A merge sums its shards' rows and
  // recomputes the missing ones; it has none when a shard's report carries no rows.
  std::vector<props::CoverageRow> coverage;
  std::vector<std::string> coverage_missing;
  std::string coverage_table;
  int exit_code = kExitPass;
};

// Sets not_verified and exit_code: 1 with a failure or with a property that never ran (every case
// skipped), else 0.
void judge(CampaignReport& report);
// The human-readable summary: per-property counts, failures, the verdict line.
void print_campaign(const CampaignReport& report, std::ostream& out);

// A fuzz campaign (props::run_campaign), or one shard of it: every property on random cases,
// failures shrunk and written as scenario files.
CampaignReport run_fuzz(const FuzzOptions& options, std::ostream& out);
// The same on a backend the caller brings (options.backend is only its label in the report).
CampaignReport run_fuzz(Backend& backend, const FuzzOptions& options, std::ostream& out);
int fuzz(const FuzzOptions& options, std::ostream& out);

// "K/N" -> (K, N) with 0 <= K < N <= kMaxShards; InvalidInput("shard", -1, ...) otherwise.
void parse_shard(const std::string& text, int32_t& index, int32_t& count);

// Combines the reports of the N shards of one campaign into the campaign's report (judged).
// InvalidInput naming the file and field when the reports disagree on the campaign (backend,
// seed, cases, properties, shard count), a shard is missing or given twice, or a shard's case
// count is not its share.
CampaignReport merge_reports(const std::vector<CampaignReport>& shards,
                             const std::vector<std::string>& names);
struct MergeOptions {
  std::vector<std::filesystem::path> reports;
};
CampaignReport run_merge(const MergeOptions& options, std::ostream& out);

// ---- replay -------------------------------------------------------------------------------------

struct ReplayOptions {
  std::string backend = "cpu";
  std::vector<std::filesystem::path> paths;  // scenario files or folders of them
  bool check_recorded = true;  // also replay on the mutant a scenario was found on: must fail
  bool allow_skipped = false;  // a skipped scenario does not by itself make the exit code 1
  // A scenario whose estimated cost (props::estimate_cost) exceeds either budget is bad input,
  // refused before anything is built; a case above a second or 256 MB says its cost first.
  int64_t max_memory = int64_t{8} << 30;
  double max_seconds = 600;
  std::ostream* progress = nullptr;  // where the cost of a large case is said (run_replay's out)
};
struct ReplayEntry {
  std::string file;
  std::string property;
  std::string status;  // "pass", "fail", "skip", "bad_input"
  std::string detail;  // why it failed or skipped; the error of a bad input
  std::string field;   // bad_input: the field at fault ("case.requests[0].parents", "path")
  int64_t index = -1;  // bad_input: the index within it, -1 for the whole field
  std::string recorded_backend;  // the mutant it was found on, when re-checked
  std::string recorded;          // "", "reproduced", "not_reproduced", "test_build_fault"
};
struct ReplayResult {
  std::string backend;
  std::vector<ReplayEntry> entries;
  int32_t passed = 0, failed = 0, bad_input = 0, skipped = 0;
  int32_t reproduced = 0, not_reproduced = 0, test_build_only = 0;
  std::vector<std::string> not_verified;
  int exit_code = kExitPass;
};
// Replays scenario files; a file that does not load is reported (bad input) and the rest still
// run. Exit 1 when a replay fails, a scenario found on a mutant no longer fails there, or (without
// allow_skipped) a scenario was skipped, or all were; else 2 when any input was bad or there was
// no scenario at all; else 0.
ReplayResult run_replay(const ReplayOptions& options, std::ostream& out);
// The same on a backend the caller brings (options.backend unused).
ReplayResult run_replay(Backend& backend, const ReplayOptions& options, std::ostream& out);
int replay(const ReplayOptions& options, std::ostream& out);

// ---- backends -----------------------------------------------------------------------------------

struct BackendsResult {
  std::vector<std::string> backends;  // backend_names()
  std::vector<std::string> mutants;   // "mutant:<name>", each over cpu
};
BackendsResult run_backends();

}  // namespace mlaverify::cli

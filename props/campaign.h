// Fuzz campaigns (random cases through every selected property, failures shrunk and written as
// scenario files) and scenario replay: what the CLI's fuzz and replay commands and the tests call.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mlaverify/backend.h"
#include "props/coverage.h"
#include "props/generators.h"
#include "props/properties.h"
#include "scenarios/scenario.h"

namespace mlaverify::props {

struct CampaignOptions {
  int32_t cases = 100;                  // random cases; every selected property runs on each
  uint64_t seed = 20261129;             // the whole campaign is a function of this seed
  std::vector<std::string> properties;  // names (all_properties()); empty = all
  std::filesystem::path out_dir;        // where shrunk failures are written; empty = nowhere
  int32_t max_shrink_evals = 300;       // property evaluations spent shrinking one failure
  bool stop_at_first_failure = false;   // stop the campaign when any property fails
  std::string backend_label;            // written into scenarios; empty = backend.name()
  // Called after each case with (cases done, cases planned), for progress output; may be empty.
  // In a shard both count this shard's cases only.
  std::function<void(int32_t done, int32_t total)> on_case;
  // Called with each case this run will execute (0-based campaign index), before its properties
  // run; may be empty. Tests use it to compare the cases of shards with the whole campaign.
  std::function<void(int32_t case_index, const Case& c)> on_generated;
  GenOptions gen;
  // Sharding: this run executes campaign case i (0-based) iff i % shard_count == shard_index.
  // Case i is generated from the i-th split of the seed's stream whatever the shard, so the N
  // shards of a campaign run disjoint sets of cases whose union is exactly the unsharded
  // campaign's cases. 0 <= shard_index < shard_count.
  int32_t shard_index = 0;
  int32_t shard_count = 1;
};

// How many of a campaign's `cases` fall into shard `index` of `count`.
int32_t shard_cases(int32_t cases, int32_t index, int32_t count);

// A case's identity: a 64-bit hash (FNV-1a) of its campaign index and its full scenario JSON.
// Summed over a run's cases (mod 2^64) it gives FuzzReport::case_digest, which is independent of
// order, so the digests of a campaign's shards add up to the unsharded campaign's digest.
uint64_t case_identity(int32_t case_index, const Case& c);

struct PropertyStats {
  std::string property;
  int32_t passed = 0;
  int32_t failed = 0;
  int32_t skipped = 0;
  std::string skip_reason;  // the first skip's detail (why the backend refused the case)
  bool ran() const { return passed + failed > 0; }  // at least one case checked something
};

struct Failure {
  std::string property;
  int32_t case_index = 0;      // 1-based: how many cases the campaign had run when this failed
  Case original;               // as generated
  scenarios::Scenario shrunk;  // the smallest failing case found, ready to save
  std::string detail;          // the shrunk case's diagnostic
  int32_t shrink_evals = 0;
  int32_t shrink_steps = 0;    // accepted simplifications
  std::filesystem::path file;  // where it was written (empty if not)
  // The backend was lost (BackendLost) on this case or while shrinking it; lost_note says which.
  // A loss while shrinking also writes the candidate that met it (the last live failing case is
  // `shrunk`), to lost_file: the fault may be the worse bug.
  bool backend_lost = false;
  std::string lost_note;
  std::filesystem::path lost_file;
};

struct FuzzReport {
  uint64_t seed = 0;
  int32_t cases_planned = 0;  // the whole campaign's cases (CampaignOptions::cases)
  int32_t shard_index = 0;
  int32_t shard_count = 1;
  int32_t cases_run = 0;     // cases this run executed (this shard's, when sharded)
  uint64_t case_digest = 0;  // sum of case_identity over the cases run
  double seconds = 0;
  std::vector<PropertyStats> stats;  // in all_properties() order, selected ones only
  std::vector<Failure> failures;
  Coverage coverage;  // what the generated cases took (run_campaign: from the backend's caps)
  // The backend was lost (BackendLost) and the campaign stopped after that failure's case (the
  // last failure's case_index, which run_campaign records last); cases_run counts the cases run
  // up to and with it.
  bool backend_lost() const { return !failures.empty() && failures.back().backend_lost; }
  // Every selected property checked at least one case (a campaign that ran nothing, or a
  // property the backend skipped on every case, proves nothing and is not a pass).
  bool complete() const {
    if (cases_run == 0) return false;
    for (const auto& s : stats) {
      if (!s.ran()) return false;
    }
    return true;
  }
  bool ok() const { return failures.empty() && complete(); }
  std::string to_string() const;
};

// The cases a backend takes: `a`'s sets and limits narrowed by `b`'s (numerics and the declared
// behaviour, lse, determinism, honours_num_splits, come from `b`, the backend), balanced_plan
// too (drawn only when both allow it).
Capabilities intersect(const Capabilities& a, const Capabilities& b);

// Generates options.cases cases from options.seed (gen_case) inside what the backend declares
// (options.gen.caps narrowed by backend.capabilities()), runs every selected property on each
// case of the selected shard (all of them unless sharded)
// against `backend`, shrinks each failure (a property fails at most once per campaign: after its
// first failure it is not run again) and writes it to out_dir as
// "<property>-<backend>-<seed>-<case>.json". Deterministic in the seed for a deterministic backend.
FuzzReport run_campaign(Backend& backend, const CampaignOptions& options);

// The coverage table of the cases run_campaign(backend, options) would run, drawn the same way
// (same seed, one split per case, the same shard), with no property run: cheap enough to ask how
// a campaign's generator covers a backend's declaration over many more cases than are affordable
// to run. run_campaign's report.coverage equals this for the same options.
Coverage campaign_coverage(const Backend& backend, const CampaignOptions& options);

// Greedy shrinking of a failing case for one property: tries simpler_cases, keeps the first that
// still fails, repeats; at most max_evals evaluations. Returns the last failing case and its
// result.
// A lost backend (PropertyResult::backend_lost) ends the shrinking, or prevents it when
// `first_result` already met it: `lost` is set and `smallest` is the last case that failed while
// the backend still ran (`failing` itself when it never did), `lost_case` the simpler candidate
// that met the loss, if one did.
struct ShrinkResult {
  Case smallest;
  PropertyResult result;
  int32_t evals = 0;
  int32_t steps = 0;
  bool lost = false;
  std::string lost_detail;
  std::optional<Case> lost_case;  // the candidate that met the lost backend
};
ShrinkResult shrink_failure(Backend& backend, const PropertyInfo& property, const Case& failing,
                            const PropertyResult& first_result, int32_t max_evals);

// Runs the scenario's property on `backend` (whatever backend the scenario names: it records where
// the failure was found, and any backend should pass). InvalidInput for an unknown property.
PropertyResult replay(const scenarios::Scenario& scenario, Backend& backend);

// Seed for a test or CLI run: MLAV_SEED from the environment when set, else `fallback`.
uint64_t seed_from_env(uint64_t fallback);
// Case count: MLAV_CASES from the environment when set, else `fallback`.
int32_t cases_from_env(int32_t fallback);

}  // namespace mlaverify::props

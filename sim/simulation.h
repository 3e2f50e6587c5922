// The serving simulation of one rank (issue 14): requests arrive, each step drafts trees, builds
// the verify batch over a model::ServingState, runs it through a Backend, accepts paths, frees the
// rest and finishes requests, checking the allocator every step and the attention on a sample.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mlaverify/backend.h"
#include "model/serving.h"

namespace mlaverify::sim {

enum class TreeKind : int32_t {
  DdTree = 0,  // DDTree best-first: the tree_budget most probable nodes, depth <= 16
  Eagle = 1,   // EAGLE top-k per depth: eagle_topk nodes kept at each of eagle_depth levels
  Mtp = 2,     // DeepSeek MTP chain of mtp_len nodes
};

enum class DefragPolicy : int32_t {
  Off = 0,
  Tier0 = 1,           // sorted allocation (need_sort forced), nothing moves
  Tier1Threshold = 2,  // compact when runs per request exceeds frag_threshold
  Tier1Every = 3,      // compact every defrag_every steps
};

// Faults planted into the serving lifecycle (tests and demonstrations): each is applied once, at
// the first step >= fault_step where it can act, right after a correct accept.
enum class PlantedFault : int32_t {
  None = 0,
  StaleSlotAfterAccept = 1,  // token: req_to_token keeps the draft slot of a rejected node;
                             // paged: the accepted rows are not moved to their new slots
  DoubleFree = 2,            // an accepted (still owned) slot is freed; finish frees it again
  StrandedPartialTail = 3,   // paged: the rejected tail of the last page stays committed
};

// One request of a trace file (docs/spec.md §13): when it arrives and how long it is.
struct Arrival {
  int64_t step = 0;
  int64_t prompt_len = 1;
  int64_t output_len = 1;
  bool operator==(const Arrival&) const = default;
};

struct SimConfig {
  int64_t steps = 1000;
  uint64_t seed = 1;
  // Workload: arrivals per step ~ Poisson(arrival_rate), lengths uniform in [min, max]; or the
  // trace (when non-empty, the distributions are not used).
  double arrival_rate = 0.25;
  int64_t prompt_min = 16, prompt_max = 512;
  int64_t output_min = 8, output_max = 256;
  std::vector<Arrival> trace;
  int32_t max_running = 16;  // batch size cap (requests verified per step)
  // Draft trees.
  TreeKind tree = TreeKind::DdTree;
  int32_t tree_budget = 16;  // DDTree nodes
  int32_t eagle_topk = 4, eagle_depth = 4;
  int32_t mtp_len = 4;
  // Acceptance: the child of an accepted node at depth d+1 is accepted with accept_prob[d]
  // (the last entry repeats); or, when accept_trace is non-empty, the accepted path lengths of
  // successive (step, request) verifications, cycled (clipped to the tree's deepest path).
  std::vector<double> accept_prob = {0.8, 0.7, 0.6, 0.5, 0.4};
  std::vector<int32_t> accept_trace;
  // Pool.
  int64_t pool_size = 32768;
  int64_t page_size = 1;
  model::AllocatorKind allocator = model::AllocatorKind::Token;
  bool need_sort = false;
  DefragPolicy defrag = DefragPolicy::Off;
  double frag_threshold = 8.0;  // Tier1Threshold: runs per request
  int32_t defrag_every = 100;   // Tier1Every
  // Batch presentation.
  std::vector<int32_t> graph_sizes;  // CUDA-graph capture sizes; empty: eager (no padding)
  int32_t num_splits = 1;  // VerifyParams::num_splits (prefix chunks a backend is asked for)
  std::string preset = "kimi-k2";
  int32_t tp = 8;
  // Checks: the backend runs and the attention is compared with the model every check_every
  // steps (0: never; check_steps, when non-empty, instead lists the steps); the allocator
  // invariants and the content of every accepted token are checked every step regardless.
  int32_t check_every = 1;
  std::vector<int64_t> check_steps;
  // The backend also runs (timed, not compared) every run_every steps (0: only on checked
  // steps): kernel time over a long run without the model's cost on every step.
  int32_t run_every = 0;
  PlantedFault fault = PlantedFault::None;
  int64_t fault_step = 0;
  int64_t stop_after_failure = 1;  // failures before the run stops (0: never stops)
  bool operator==(const SimConfig&) const = default;
};

// Metrics after one step (the CSV row).
struct StepMetrics {
  int64_t step = 0;
  int32_t live_requests = 0;
  int32_t batch_size = 0;    // requests verified this step
  int32_t padded_bs = 0;     // after CUDA-graph padding (== batch_size when eager)
  int64_t draft_tokens = 0;  // T
  int64_t accepted_tokens = 0;
  int32_t admitted = 0, finished = 0, retracted = 0, waiting = 0;
  double runs_per_request = 0;
  double mean_run_length = 0;
  int64_t free_list_runs = 0;
  int64_t partial_pages = 0;
  int64_t slots_moved = 0;  // by defragmentation this step
  int64_t leaked_slots =
      0;                   // allocator-held slots no request names, minus named slots it holds free
  int64_t used_slots = 0;  // tokens held by live requests
  bool checked = false;    // attention compared this step
  double backend_ms = -1;  // wall time of Backend::run (-1: not run)
  double kernel_ms = -1;   // Backend::last_device_ms after it (-1: not run or not measured)
  double worst_ratio = 0;  // max |o - ref| / bound of the step's comparison (checked steps)
};

// A failed check: what, where, and the step to replay.
struct SimFailure {
  int64_t step = 0;
  std::string kind;  // "invariant", "allocator", "content", "attention", "leak"
  std::string detail;
};

struct SimResult {
  std::vector<StepMetrics> steps;
  std::vector<SimFailure> failures;
  int64_t steps_run = 0;
  int64_t checked_steps = 0;
  int64_t requests_finished = 0;
  int64_t tokens_accepted = 0;
  int64_t max_leaked = 0;  // max |leaked_slots| over steps
  bool fault_applied = false;
  int64_t fault_applied_step = -1;
  double seconds = 0;
  double steps_per_second = 0;
};

// Validates cfg (InvalidInput naming the field) and runs the simulation through `backend`.
// on_step (optional) is called after each step with its metrics (the progress bar).
SimResult simulate(const SimConfig& cfg, Backend& backend,
                   const std::function<void(const StepMetrics&)>& on_step = {});

void validate(const SimConfig& cfg);

// Stable names (CLI options, CSV, scenario files).
std::string to_string(TreeKind v);
std::string to_string(DefragPolicy v);
std::string to_string(PlantedFault v);
TreeKind parse_tree_kind(const std::string& s);          // InvalidInput("tree", -1)
DefragPolicy parse_defrag_policy(const std::string& s);  // InvalidInput("defrag", -1)
PlantedFault parse_fault(const std::string& s);          // InvalidInput("fault", -1)

// The trace file (docs/spec.md §13): one request a line, "arrival_step,prompt_len,output_len",
// an optional header line with those names, '#' comments and blank lines ignored; steps
// non-decreasing. Errors: InvalidInput("<file>: <field>", line) naming the file, field and line.
std::vector<Arrival> parse_trace(const std::string& text, const std::string& file_name);
std::vector<Arrival> load_trace(const std::string& path);
// Accepted path lengths (`simulate --accept-trace`): integers in [1, 1024] separated by white
// space or commas; InvalidInput "<file_name>: accept_length" with the entry's index otherwise.
std::vector<int32_t> parse_accept_trace(const std::string& text, const std::string& file_name);

// CSV of the metrics: a header line and one line per step.
std::string metrics_csv(const std::vector<StepMetrics>& steps);

}  // namespace mlaverify::sim

// A simulation scenario: a failing step of a serving simulation, written so that it replays
// alone (docs/spec.md §13): the whole configuration (trace and acceptance trace included), the
// planted fault if any, and the step. Replaying re-runs the simulation, deterministic in its
// seed, to that step with the allocator checked on every step and the attention on that one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "mlaverify/backend.h"
#include "sim/simulation.h"

namespace mlaverify::sim {

inline constexpr std::string_view kSimScenarioFormat = "mlaverify-simulation-scenario";

struct SimScenario {
  SimConfig config;     // as run (fault and fault_step included)
  int64_t step = 0;     // the failing step
  std::string kind;     // SimFailure::kind
  std::string detail;   // SimFailure::detail
  std::string backend;  // the backend it ran on
  bool operator==(const SimScenario&) const = default;
};

// Whether JSON text is a simulation scenario (its "format" field), without validating it.
bool is_sim_scenario(std::string_view json_text);
std::string to_json(const SimScenario& s);
// Strict: InvalidInput naming the JSON path ("config.page_size", "config.trace[3]") for a
// missing field, a wrong type or a value validate() rejects.
SimScenario parse_sim_scenario(std::string_view json_text);
void save_sim_scenario(const std::filesystem::path& path, const SimScenario& s);
SimScenario load_sim_scenario(const std::filesystem::path& path);

// The scenario's configuration cut to end at its step, checking the attention there only.
// with_fault false drops the planted fault (the fixed code's run).
SimConfig replay_config(const SimScenario& s, bool with_fault);

struct SimReplay {
  bool reproduced = false;  // a failure at the recorded step (or earlier, for a planted fault)
  SimResult result;
};
SimReplay replay(const SimScenario& s, Backend& backend, bool with_fault);

}  // namespace mlaverify::sim

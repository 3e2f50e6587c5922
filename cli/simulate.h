// `mlaverify simulate` (issue 14): a serving simulation of one rank through a backend, every
// step's allocator checked and the attention on a sample; CSV, a summary, plots, and a
// replayable scenario for each failing step.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/simulation.h"

namespace mlaverify::cli {

struct SimulateOptions {
  sim::SimConfig config;
  std::string backend = "cpu";              // make_backend_or_mutant's names
  std::filesystem::path trace_file;         // requests (docs/spec.md §13); empty: distributions
  std::filesystem::path accept_trace_file;  // accepted path lengths; empty: accept_prob
  std::filesystem::path csv;                // per-step metrics; empty: not written
  std::filesystem::path plot;               // stem: <stem>.svg and <stem>.png; empty: none
  std::filesystem::path scenario_dir = "simulate-failures";  // where failing steps are written
  bool progress_bar = false;
  std::ostream* progress = nullptr;
};

struct SimulateResult {
  sim::SimResult sim;
  std::vector<std::filesystem::path> scenarios;  // written for failures
  int exit_code = 0;
};

SimulateResult run_simulate(const SimulateOptions& options, std::ostream& out);
// The --json document: the run's totals, failures and scenario files.
void write_simulate_json(const SimulateResult& r, std::ostream& out);
int simulate(const SimulateOptions& options, std::ostream& out);

// Accepted path lengths, whitespace- or comma-separated integers >= 1; InvalidInput("<file>:
// accept_length", k) naming the file and the entry.
std::vector<int32_t> load_accept_trace(const std::filesystem::path& path);

}  // namespace mlaverify::cli

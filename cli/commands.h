// The CLI's commands as plain functions (CLI11 stays in main.cpp): each returns the process exit
// code and prints a human-readable summary to `out`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace mlaverify::cli {

struct SelfcheckOptions {
  int32_t cases_per_config = 2;  // generated batches per (preset, tp)
  uint64_t seed = 20261129;
};
// The model checks itself over every preset at TP1 and TP8: every property of the suite with the
// model as the backend (chain == causal, draft source, slot permutation, representations, batch
// independence, metadata), and the CPU backend against it. Exit 0 when all hold.
int selfcheck(const SelfcheckOptions& options, std::ostream& out);

struct FuzzOptions {
  std::string backend = "cpu";          // model, cpu, cuda, or mutant:<name> (over cpu)
  int32_t cases = 100;
  uint64_t seed = 20261129;
  std::vector<std::string> properties;  // empty: all
  std::filesystem::path out_dir;        // shrunk failures as scenario files; empty: not written
};
// A fuzz campaign (props::run_campaign): every property on random cases, failures shrunk and
// written as scenario files. Exit 0 when no property failed.
int fuzz(const FuzzOptions& options, std::ostream& out);

struct ReplayOptions {
  std::string backend = "cpu";
  std::vector<std::filesystem::path> paths;  // scenario files or folders of them
  bool check_recorded = true;  // also replay on the mutant a scenario was found on: must fail
};
// Replays scenario files. Exit 0 when every replay passes on `backend` and every scenario found
// on a mutant still fails on that mutant (the file reproduces its bug).
int replay(const ReplayOptions& options, std::ostream& out);

}  // namespace mlaverify::cli

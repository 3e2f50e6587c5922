// The CLI's server-dump commands (replay of a dump, diagnose), as plain functions: each returns
// the exit code (0 pass, 1 mismatch, 2 bad input) and prints to `out` (text, or JSON with json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "mlaverify/backend.h"

namespace mlaverify::cli {

struct DumpOptions {
  std::string backend;        // empty: the model only; else also run this backend on the dump
  bool json = false;          // one JSON object on `out` instead of text
  int64_t max_memory = int64_t{8} << 30;  // bytes the dump and its buffers may hold
  double max_seconds = 600;   // refuse a dump whose estimated model time is longer
  std::vector<std::string> readings;  // diagnose: only these (empty: all)
  std::string command = "replay";     // names the command in a --json error document
  // replay: run this backend (a caller's, e.g. a Python one through capi/) instead of making
  // `backend` by name, which then only labels it. Not owned.
  Backend* backend_object = nullptr;
};

// Whether `path` names a server dump (a .safetensors file) rather than a scenario.
bool is_dump_path(const std::filesystem::path& path);

// Recomputes the dump with the model (and the backend when named), compares the server's o and
// lse element by element against the bound for a bf16-in, fp32-accumulate, bf16-out kernel,
// per request, padded rows apart. 0 when every real element of the server's outputs (and of the
// backend's) is within bound; 1 otherwise; 2 for a bad file.
int replay_dump(const std::filesystem::path& path, const DumpOptions& options, std::ostream& out);

// Re-runs the model under every known wrong reading of the dump's inputs and ranks them by how
// well each explains the server's outputs. 0 when the as-given reading explains them, 1 when it
// does not (the verdict names the reading that does, or the closest two), 2 for a bad file.
int diagnose_dump(const std::filesystem::path& path, const DumpOptions& options,
                  std::ostream& out);

}  // namespace mlaverify::cli

// Diagnosing a server dump whose outputs disagree with the model: the model re-run under every
// known wrong reading of the inputs (docs/spec.md §7), each reading ranked by how well it explains
// the server's o (and lse), so a person learns *which* misreading the server's kernel made.
#pragma once

#include <string>
#include <vector>

#include "dump/dump.h"
#include "dump/replay.h"

namespace mlaverify::dump {

struct ReadingInfo {
  std::string name;         // "rope_first_cache", stable, for --json and --reading
  int32_t spec_class = 0;   // the bug class of docs/spec.md §7 it expresses (0: none)
  std::string description;  // "the cache row read rope-first ([k_pe | c])"
};

// Every reading diagnose knows, in report order; "as_given" first.
const std::vector<ReadingInfo>& all_readings();

struct ReadingResult {
  ReadingInfo info;
  bool applicable = true;
  std::string why_not;  // when not applicable: what the dump lacks or makes meaningless
  Comparison vs_server;  // the server's outputs against the model under this reading
  // max over real elements of |o_reading - o_as_given| / bound: <= 1 means this dump cannot
  // tell the reading from the correct one (e.g. parent-only on a tree of depth 1).
  double distance_from_given = 0;
  int32_t requests_within = 0;  // real requests whose every element is within bound
  bool explains() const { return applicable && vs_server.pass(); }
};

struct Diagnosis {
  int32_t real_requests = 0;
  bool lse_compared = false;
  ReadingResult as_given;
  std::vector<ReadingResult> ranked;  // the other applicable readings, best explanation first
  std::vector<ReadingResult> not_applicable;
  std::string verdict;  // the one-paragraph answer
};

// Runs every reading (or only those named in `only`) against the dump's server outputs.
// Throws InvalidInput when the dump holds no server o, or names an unknown reading.
Diagnosis diagnose(ServerDump& dump, const KernelAssumptions& assume,
                   const std::vector<std::string>& only = {});

// The model's o and lse for the dump as given, with the bound: replay's reference.
struct Reference {
  std::vector<double> o;    // [T, H, 512]
  std::vector<double> lse;  // [T, H]
  BoundTerms bound;
};
Reference reference(ServerDump& dump, const KernelAssumptions& assume);

// The model's o [T, H, 512] under one reading (what a server with that bug would have written,
// before its bf16 rounding). Throws InvalidInput for an unknown or inapplicable reading.
std::vector<double> reading_output(ServerDump& dump, const std::string& reading);

}  // namespace mlaverify::dump

// `mlaverify convert IN OUT --to FORMAT`: a mask file (docs/spec.md §11; a server dump is one) in
// another §3.4 mask format, every other tensor and key kept.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

namespace mlaverify::cli {

struct ConvertOptions {
  std::filesystem::path in;
  std::filesystem::path out;
  std::string to;      // a §3.4 format name (full_mask or full, qlen_only, ...), or "parents"
  std::string indptr;  // "csr" | "offsets" | "" (the source's convention; csr when it has none)
  int32_t word_bytes = 0;  // qlen_only_bitpacking word: 1, 2, 4, or 0 (the smallest that fits)
  int64_t max_memory = int64_t{8} << 30;  // bytes IN may have
  bool json = false;  // one JSON document on `out` instead of the summary line
};

// Reads IN, re-encodes every request's draft block as `to` and writes OUT (with --to parents:
// the real requests' trees as a JSON list of parent arrays). Prints one summary line (and notes)
// to `out`, or with json one document {"command": "convert", "exit_code", "in", "out", "notes"}
// ({"command", "exit_code", "error": {field, index, message}} on failure). 0 when written; 2 for
// bad input (a malformed file, an unknown format, a batch the format cannot express), one line
// naming the file, field and index.
int convert(const ConvertOptions& options, std::ostream& out);

}  // namespace mlaverify::cli

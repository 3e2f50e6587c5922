// What a campaign actually generated: per VerifyParams field, how many cases took each value, and
// per edge (P = 0, an empty split, D = 1, tile edges, H not a power of two, a SPEC §8-sized
// request, ...) how many cases hit it. Values the backend declares it takes but that no case
// took are listed as missing: a generator that never varies a field is a hole in the suite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlaverify/backend.h"
#include "props/case.h"

namespace mlaverify::props {

struct CoverageRow {
  std::string field;  // "mask_format", "edge"
  std::string value;  // "draft_bits", "P = 0"
  bool accepted = true;  // the backend declares it takes this value (edges: always, but the
                         // balanced plan's only where Capabilities::balanced_plan says so)
  int32_t cases = 0;     // cases generated with it
};

// "field=value" for every accepted row with no case (Coverage::missing over any rows: a report's
// read back, or shards' summed).
std::vector<std::string> coverage_missing(const std::vector<CoverageRow>& rows);

class Coverage {
 public:
  Coverage() = default;
  // One row for every value of every field, marked by what `caps` accepts.
  explicit Coverage(const Capabilities& caps);

  void add(const Case& c);
  // Sums another campaign's (or shard's) counts into this one (same rows).
  void merge(const Coverage& other);

  const std::vector<CoverageRow>& rows() const { return rows_; }
  int32_t cases() const { return cases_; }
  // "field=value" for every accepted row no case took.
  std::vector<std::string> missing() const;
  // A table: field, value, cases, and "(not accepted)" / "MISSING" marks.
  std::string to_string() const;

 private:
  void count(const std::string& field, const std::string& value);
  std::vector<CoverageRow> rows_;
  int32_t cases_ = 0;
  int32_t max_heads_ = 128;
};

}  // namespace mlaverify::props

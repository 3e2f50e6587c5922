// req_to_token: SGLang's int32 map from (request row, token position) to KV-cache slot id.
// Row 0 is reserved for CUDA-graph padding (docs/spec.md §3, §4); real requests use 1..max_reqs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mlaverify/error.h"

namespace mlaverify::model {

class ReqToToken {
 public:
  // Zero-filled: slot 0 is the sink, so an unwritten entry reads as "the padding slot", which is
  // what SGLang's freshly allocated buffer holds too.
  ReqToToken(int64_t max_reqs, int64_t max_context_len)
      : rows_(checked_dim("max_reqs", max_reqs) + 1),
        cols_(checked_dim("max_context_len", max_context_len)),
        data_(static_cast<size_t>(rows_ * cols_), 0) {}

  int64_t rows() const { return rows_; }  // max_reqs + 1 (row 0 included)
  int64_t cols() const { return cols_; }  // max_context_len

  int32_t at(int64_t r, int64_t j) const { return data_[static_cast<size_t>(index(r, j))]; }

  void set(int64_t r, int64_t j, int32_t slot) { data_[static_cast<size_t>(index(r, j))] = slot; }

  const int32_t* data() const { return data_.data(); }  // [rows, cols] row-major
  int32_t* data() { return data_.data(); }              // [rows, cols] row-major

  std::span<const int32_t> row(int64_t r) const {  // [cols]
    if (r < 0 || r >= rows_) {
      throw InvalidInput(
          "req_to_token", r * cols_,
          "row " + std::to_string(r) + " outside [0, " + std::to_string(rows_) + ")");
    }
    return {data_.data() + r * cols_, static_cast<size_t>(cols_)};
  }

 private:
  static int64_t checked_dim(const char* field, int64_t v) {
    if (v < 1) throw InvalidInput(field, -1, "must be >= 1, got " + std::to_string(v));
    return v;
  }

  // Flat index in int64 (rows * cols can pass 2^31 for long contexts). The error names the flat
  // index r * cols + j, which is what a caller indexing the raw buffer would have touched.
  int64_t index(int64_t r, int64_t j) const {
    if (r < 0 || r >= rows_ || j < 0 || j >= cols_) {
      throw InvalidInput("req_to_token", r * cols_ + j,
                         "(" + std::to_string(r) + ", " + std::to_string(j) + ") outside [" +
                             std::to_string(rows_) + ", " + std::to_string(cols_) + "]");
    }
    return r * cols_ + j;
  }

  int64_t rows_;
  int64_t cols_;
  std::vector<int32_t> data_;  // [max_reqs + 1, max_context_len]
};

}  // namespace mlaverify::model

// BitRows: a dense rows x cols bit matrix (uint64 words, row-major), the ancestor-bitset form of a
// draft tree and the decoded D x D visibility block every mask format reduces to.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "mlaverify/error.h"

namespace mlaverify::model {

class BitRows {
 public:
  BitRows() = default;

  // All bits clear. Rows are padded to whole 64-bit words; padding bits stay zero so that
  // operator== and count_row can work on whole words.
  BitRows(int32_t rows, int32_t cols) : rows_(rows), cols_(cols) {
    if (rows < 0) throw InvalidInput("rows", -1, "negative row count " + std::to_string(rows));
    if (cols < 0) throw InvalidInput("cols", -1, "negative column count " + std::to_string(cols));
    words_per_row_ = (cols + 63) / 64;
    words_.assign(static_cast<size_t>(rows) * static_cast<size_t>(words_per_row_),
                  0);  // [rows, wpr]
  }

  int32_t rows() const { return rows_; }
  int32_t cols() const { return cols_; }
  int32_t words_per_row() const { return words_per_row_; }

  bool test(int32_t r, int32_t c) const {
    check(r, c);
    return (word(r, c) >> (c & 63)) & 1u;
  }

  void set(int32_t r, int32_t c, bool v = true) {
    check(r, c);
    uint64_t bit = uint64_t{1} << (c & 63);
    uint64_t& w = words_[index(r, c)];
    w = v ? (w | bit) : (w & ~bit);
  }

  int32_t count_row(int32_t r) const {
    check_row(r);
    int32_t n = 0;
    for (int32_t k = 0; k < words_per_row_; ++k) n += std::popcount(row_words(r)[k]);
    return n;
  }

  // Whole-word access for O(D^2 / 64) tree algorithms (copy a parent's row, compare rows).
  // Callers keep bits at columns >= cols() clear.
  const uint64_t* row_words(int32_t r) const {
    check_row(r);
    return words_.data() + static_cast<size_t>(r) * words_per_row_;
  }
  uint64_t* row_words(int32_t r) {
    check_row(r);
    return words_.data() + static_cast<size_t>(r) * words_per_row_;
  }

  friend bool operator==(const BitRows& a, const BitRows& b) {
    return a.rows_ == b.rows_ && a.cols_ == b.cols_ && a.words_ == b.words_;
  }

 private:
  void check_row(int32_t r) const {
    if (r < 0 || r >= rows_) {
      throw InvalidInput("row", r, "outside [0, " + std::to_string(rows_) + ")");
    }
  }
  void check(int32_t r, int32_t c) const {
    check_row(r);
    if (c < 0 || c >= cols_) {
      throw InvalidInput("col", c, "outside [0, " + std::to_string(cols_) + ")");
    }
  }
  size_t index(int32_t r, int32_t c) const {
    return static_cast<size_t>(r) * words_per_row_ + static_cast<size_t>(c >> 6);
  }
  uint64_t word(int32_t r, int32_t c) const { return words_[index(r, c)]; }

  int32_t rows_ = 0;
  int32_t cols_ = 0;
  int32_t words_per_row_ = 0;
  std::vector<uint64_t> words_;  // [rows, words_per_row]
};

}  // namespace mlaverify::model

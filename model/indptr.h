// Indptr arrays with their convention carried in the type: CSR [bs+1] versus offsets-only [bs].
// Mixing the two up is the classic bug of this field (docs/spec.md §3): every indptr is checked.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "mlaverify/error.h"
#include "mlaverify/types.h"

namespace mlaverify::model {

inline const char* convention_name(IndptrConvention c) {
  return c == IndptrConvention::Csr ? "CSR" : "offsets-only";
}

// Checks a raw indptr of `len` entries against the convention `conv` for `batch` requests:
//  - the length is indptr_length(conv, batch): [bs+1] for CSR, [bs] for offsets-only. A wrong
//    length is the "[:bs+1] handed where [:bs] was expected" bug, so the message names the slice;
//  - CSR starts at 0; offsets-only starts at >= 0 (a start is an offset into a buffer);
//  - entries never decrease: the offending index is the entry smaller than its predecessor;
//  - with `total`: CSR ends exactly at it (the buffer it indexes has that many units), and
//    offsets-only starts no request past it.
// Throws InvalidInput(field, index, detail); index -1 when the whole field is at fault.
template <class T>
void check_indptr(std::string_view field, const T* values, int64_t len, IndptrConvention conv,
                  int64_t batch, std::optional<int64_t> total = std::nullopt) {
  static_assert(std::is_integral_v<T>, "indptr entries are integers");
  const std::string f(field);
  if (conv != IndptrConvention::Csr && conv != IndptrConvention::OffsetsOnly) {
    throw InvalidInput(f, -1,
                       "unknown indptr convention " + std::to_string(static_cast<int>(conv)));
  }
  if (batch < 0) throw InvalidInput(f, -1, "batch size " + std::to_string(batch) + " < 0");
  const int64_t want = indptr_length(conv, batch);
  if (len != want) {
    // The likely cause is the other convention's slice; say which, since that is the bug to fix.
    const bool csr = conv == IndptrConvention::Csr;
    std::string hint;
    if (len == want - 1) hint = csr ? "; a [:bs] slice?" : "";
    if (len == want + 1) hint = csr ? "" : "; a [:bs+1] slice?";
    throw InvalidInput(f, -1,
                       std::string("expected [") + (csr ? "bs+1" : "bs") +
                           "]=" + std::to_string(want) + " entries (" + convention_name(conv) +
                           "), got " + std::to_string(len) + hint);
  }
  if (len > 0 && values == nullptr) throw InvalidInput(f, -1, "null pointer");
  if (len == 0) return;
  if (conv == IndptrConvention::Csr && values[0] != 0) {
    throw InvalidInput(f, 0, "CSR must start at 0, got " + std::to_string(values[0]));
  }
  if (values[0] < 0) throw InvalidInput(f, 0, "negative offset " + std::to_string(values[0]));
  for (int64_t i = 1; i < len; ++i) {
    if (values[i] < values[i - 1]) {
      throw InvalidInput(f, i,
                         "not non-decreasing (" + std::to_string(values[i]) + " < " +
                             std::to_string(values[i - 1]) + ")");
    }
  }
  if (total) {
    const int64_t last = static_cast<int64_t>(values[len - 1]);
    if (conv == IndptrConvention::Csr && last != *total) {
      throw InvalidInput(
          f, len - 1, "last entry " + std::to_string(last) + " != total " + std::to_string(*total));
    }
    if (conv == IndptrConvention::OffsetsOnly && last > *total) {
      throw InvalidInput(f, len - 1,
                         "start " + std::to_string(last) + " past total " + std::to_string(*total));
    }
  }
}

template <class T>
void check_indptr(std::string_view field, std::span<const T> values, IndptrConvention conv,
                  int64_t batch, std::optional<int64_t> total = std::nullopt) {
  check_indptr(field, values.data(), static_cast<int64_t>(values.size()), conv, batch, total);
}

// An indptr and the convention it follows. Values are T (int32 for qo/kv_indptr, int64 for
// mask_indptr, docs/spec.md §3). The class does not enforce its invariants on construction (mutants
// and properties build wrong ones on purpose); check() does.
template <class T>
class Indptr {
 public:
  static_assert(std::is_integral_v<T>, "indptr entries are integers");

  Indptr() = default;
  Indptr(std::vector<T> values, IndptrConvention convention)
      : values_(std::move(values)), convention_(convention) {}

  // CSR prefix sums of `sizes` ([bs] -> [bs+1]). Throws on a negative size or when a sum does not
  // fit in T (an int32 kv_indptr over a 2^31-token batch would wrap silently otherwise).
  static Indptr csr_from_sizes(std::span<const int64_t> sizes) {
    std::vector<T> v(sizes.size() + 1);  // [bs+1]
    int64_t acc = 0;
    v[0] = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0) {
        throw InvalidInput("sizes", static_cast<int64_t>(i),
                           "negative size " + std::to_string(sizes[i]));
      }
      if (sizes[i] > static_cast<int64_t>(std::numeric_limits<T>::max()) - acc) {
        throw InvalidInput(
            "sizes", static_cast<int64_t>(i),
            "prefix sum overflows a " + std::to_string(sizeof(T) * 8) + "-bit indptr");
      }
      acc += sizes[i];
      v[i + 1] = static_cast<T>(acc);
    }
    return Indptr(std::move(v), IndptrConvention::Csr);
  }

  IndptrConvention convention() const { return convention_; }
  const std::vector<T>& values() const { return values_; }
  std::vector<T>& values() { return values_; }  // mutable: mutants rewrite entries on purpose
  const T* data() const { return values_.data(); }
  int64_t length() const { return static_cast<int64_t>(values_.size()); }

  // Requests described: entries - 1 for CSR, entries for offsets-only (0 for an empty CSR).
  int64_t batch() const {
    const int64_t n = length();
    return convention_ == IndptrConvention::Csr ? (n > 0 ? n - 1 : 0) : n;
  }

  // Start of request i: entry i under both conventions.
  int64_t start(int64_t i) const {
    if (i < 0 || i >= batch()) {
      throw InvalidInput("indptr", i, "request outside [0, " + std::to_string(batch()) + ")");
    }
    return static_cast<int64_t>(values_[static_cast<size_t>(i)]);
  }

  // Size of request i: CSR only. Offsets-only does not know where a request ends (segments may
  // be padded apart), so asking is an error rather than a guess.
  int64_t size(int64_t i) const {
    if (convention_ != IndptrConvention::Csr) {
      throw InvalidInput("indptr", i, "size() needs a CSR indptr; this one is offsets-only");
    }
    const int64_t s = start(i);
    return static_cast<int64_t>(values_[static_cast<size_t>(i + 1)]) - s;
  }

  // The same offsets in convention `c`. CSR -> offsets-only drops the end; offsets-only -> CSR
  // needs the end of the last request, `total`, and requires contiguous segments (true of every
  // buffer this library encodes: request i+1 starts where request i ends).
  Indptr to(IndptrConvention c, std::optional<int64_t> total = std::nullopt) const {
    if (c == convention_) return *this;
    if (c == IndptrConvention::OffsetsOnly) {
      if (values_.empty()) throw InvalidInput("indptr", -1, "empty CSR indptr (needs bs+1 >= 1)");
      return Indptr(std::vector<T>(values_.begin(), values_.end() - 1), c);
    }
    if (!total) {
      throw InvalidInput("indptr", -1,
                         "offsets-only -> CSR needs the total (end of the last request)");
    }
    if (!values_.empty() && *total < static_cast<int64_t>(values_.back())) {
      throw InvalidInput("indptr", length() - 1,
                         "total " + std::to_string(*total) + " before the last start " +
                             std::to_string(values_.back()));
    }
    std::vector<T> v(values_);
    v.push_back(static_cast<T>(*total));
    return Indptr(std::move(v), c);
  }

  void check(std::string_view field, int64_t batch,
             std::optional<int64_t> total = std::nullopt) const {
    check_indptr<T>(field, values_.data(), length(), convention_, batch, total);
  }

 private:
  std::vector<T> values_;  // [bs+1] (Csr) or [bs] (OffsetsOnly)
  IndptrConvention convention_ = IndptrConvention::Csr;
};

}  // namespace mlaverify::model

// Reading and writing one element of a buffer stored as a DType (bf16 or fp32), in double.
// The reference model reads the very stored values a kernel reads and rounds its outputs once.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "mlaverify/types.h"

namespace mlaverify::model {

// Rounds a double to the nearest bf16, ties to even, in one rounding.
//
// Why not simply float_to_bf16(float(v)): that rounds twice and can differ from one rounding.
// Example: v = 1 + 2^-8 + 2^-30 lies just above the midpoint between the bf16 values 1 and
// 1 + 2^-7; float(v) = 1 + 2^-8 exactly (2^-30 is below half a float ulp), and ties-to-even then
// picks 1, while the nearest bf16 to v is 1 + 2^-7 (tests/model/test_bf16.cpp checks this case).
//
// What we do instead: round v to float *to odd* (truncate toward zero, then set the last bit if
// anything was cut off), then RNE to bf16 with float_to_bf16. Round-to-odd into a format with at
// least two more bits of precision than the target makes the second rounding exact (Boldo and
// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
// odd"): the odd last bit is a sticky bit that keeps "exactly half" apart from "a little more or
// less than half". float carries 16 more bits than bf16 at every exponent, subnormals included
// (both share the 8-bit exponent), so the argument holds over the whole range. Beyond FLT_MAX the
// truncation gives FLT_MAX (odd bits 0x7f7fffff), which float_to_bf16 rounds to Inf, as IEEE does
// for anything at or above the bf16 overflow midpoint.
inline bf16 double_to_bf16(double v) {
  if (std::isnan(v)) {
    // Keep the sign, force a quiet NaN; float_to_bf16 would do the same with float's NaN.
    return bf16{static_cast<uint16_t>(std::signbit(v) ? 0xffc0u : 0x7fc0u)};
  }
  float f = static_cast<float>(v);  // RNE; may have rounded away from zero
  if (std::isinf(v)) return float_to_bf16(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) {
    f = std::nextafter(f, 0.0f);  // truncated toward zero (Inf steps back to FLT_MAX)
  }
  if (static_cast<double>(f) != v) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u |= 1u;  // sticky: the odd neighbour of the two floats bracketing v
    std::memcpy(&f, &u, sizeof f);
  }
  return float_to_bf16(f);
}

// Element `index` of a buffer of dtype `d`, as a double (exact: bf16 and fp32 embed in double).
inline double load(DType d, const void* base, int64_t index) {
  switch (d) {
    case DType::BF16:
      return static_cast<double>(bf16_to_float(static_cast<const bf16*>(base)[index]));
    case DType::F32:
      return static_cast<double>(static_cast<const float*>(base)[index]);
  }
  throw InvalidInput("dtype", -1, "unknown DType " + std::to_string(static_cast<int32_t>(d)));
}

// Elements [index, index + n) of a buffer of dtype `d` into out[0, n): load() for a whole row,
// with the dtype dispatched once so the widening loop vectorizes (the model reads 576-element
// rows per key, and a per-element switch dominated small-head cases).
inline void load_row(DType d, const void* base, int64_t index, int n, double* out) {
  switch (d) {
    case DType::BF16: {
      const bf16* src = static_cast<const bf16*>(base) + index;
      for (int k = 0; k < n; ++k) out[k] = static_cast<double>(bf16_to_float(src[k]));
      return;
    }
    case DType::F32: {
      const float* src = static_cast<const float*>(base) + index;
      for (int k = 0; k < n; ++k) out[k] = static_cast<double>(src[k]);
      return;
    }
  }
  throw InvalidInput("dtype", -1, "unknown DType " + std::to_string(static_cast<int32_t>(d)));
}

// Writes v into element `index` of a buffer of dtype `d`, rounded once to nearest-even.
inline void store(DType d, void* base, int64_t index, double v) {
  switch (d) {
    case DType::BF16:
      static_cast<bf16*>(base)[index] = double_to_bf16(v);
      return;
    case DType::F32:
      static_cast<float*>(base)[index] = static_cast<float>(v);  // one RNE rounding
      return;
  }
  throw InvalidInput("dtype", -1, "unknown DType " + std::to_string(static_cast<int32_t>(d)));
}

}  // namespace mlaverify::model

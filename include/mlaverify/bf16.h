// bf16 storage type and exact round-to-nearest-even conversion, identical on host and device.
// The reference model reads the very bf16 values a kernel reads, so conversion must be exact.
#pragma once

#include <cstdint>
#include <cstring>

#include "mlaverify/hd.h"

namespace mlaverify {

// Plain 16-bit storage; layout-compatible with __nv_bfloat16.
struct bf16 {
  uint16_t bits;
};

MLAV_HD float bf16_to_float(bf16 x) {
  uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even. NaN stays NaN (quiet bit forced so truncation cannot make Inf);
// overflow rounds to Inf as IEEE requires.
MLAV_HD bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// Rounds a float to the nearest bf16 value and returns it as a float.
MLAV_HD float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace mlaverify

// Tests of include/mlaverify/bf16.h (float <-> bf16, round to nearest even) and of the one-rounding
// double -> bf16 conversion in model/storage.h, against an independent nearest-value reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/storage.h"

namespace mlaverify::model {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t bf(float f) { return float_to_bf16(f).bits; }

// Independent decoder: the value of a bf16 bit pattern from its fields, by the IEEE definition
// (1 sign, 8 exponent bits with bias 127, 7 fraction bits), not by widening to float.
double decode_bf16(uint16_t b) {
  int sign = b >> 15;
  int exp = (b >> 7) & 0xff;
  int frac = b & 0x7f;
  double mag;
  if (exp == 0xff) {
    mag = frac == 0 ? std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<double>(frac), -126 - 7);  // subnormal: 0.frac * 2^-126
  } else {
    mag = std::ldexp(static_cast<double>(128 + frac), exp - 127 - 7);
  }
  return sign ? -mag : mag;
}

// Nearest-even reference for any double: the non-negative finite bf16 magnitudes in ascending
// order (bits 0x0000..0x7f7f are ascending by construction of IEEE), plus the virtual next value
// 2^128 that stands for Inf, so "rounds to Inf" is "nearer to 2^128 than to the largest finite".
struct NearestRef {
  std::vector<double> mags;  // mags[k] = value of bits k, k <= 0x7f7f; mags[0x7f80] = 2^128
  NearestRef() {
    for (uint32_t k = 0; k <= 0x7f7f; ++k) mags.push_back(decode_bf16(static_cast<uint16_t>(k)));
    mags.push_back(std::ldexp(1.0, 128));
  }
  uint16_t operator()(double v) const {
    double a = std::fabs(v);
    uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (a >= mags.back()) return sign | 0x7f80;
    // hi = first magnitude >= a; lo the one before. Comparing 2a with lo + hi is exact: 2a is
    // exact, and lo + hi of two adjacent bf16 values needs at most 9 significant bits.
    size_t hi = std::lower_bound(mags.begin(), mags.end(), a) - mags.begin();
    if (mags[hi] == a) return sign | static_cast<uint16_t>(hi);
    size_t lo = hi - 1;
    double twice = 2.0 * a, mid = mags[lo] + mags[hi];
    size_t pick = twice < mid ? lo : twice > mid ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | static_cast<uint16_t>(pick);
  }
};

const NearestRef& nearest_ref() {
  static const NearestRef ref;
  return ref;
}

TEST(Bf16, TiesRoundToEven) {
  // 1 + 2^-8 is halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): goes to 0x3f80.
  EXPECT_EQ(bf(from_bits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 0x3f81 (odd) and 0x3f82 (even): goes up to 0x3f82.
  EXPECT_EQ(bf(from_bits(0x3f818000u)), 0x3f82);
  // One float ulp either side of a tie is no longer a tie.
  EXPECT_EQ(bf(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf(from_bits(0x3f807fffu)), 0x3f80);
  // Negative values mirror.
  EXPECT_EQ(bf(from_bits(0xbf808000u)), 0xbf80);
  EXPECT_EQ(bf(from_bits(0xbf818000u)), 0xbf82);
  // A carry out of the fraction bumps the exponent: (2 - 2^-8) is halfway to 2, rounds to 2.0.
  EXPECT_EQ(bf(from_bits(0x3fff8000u)), 0x4000);
}

TEST(Bf16, NanStaysNan) {
  // Signalling NaNs whose payload lies only in the low 16 bits would truncate to Inf (0x7f80);
  // the quiet bit keeps them NaN, with the sign.
  for (uint32_t u :
       {0x7f800001u, 0x7f80ffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    float f = from_bits(u);
    ASSERT_TRUE(std::isnan(f));
    uint16_t b = bf(f);
    EXPECT_TRUE(std::isnan(bf16_to_float(bf16{b}))) << std::hex << u << " -> " << b;
    EXPECT_EQ(b >> 15, u >> 31) << std::hex << u;
  }
  EXPECT_TRUE(std::isnan(bf16_to_float(double_to_bf16(std::nan("")))));
  EXPECT_TRUE(std::isnan(bf16_to_float(double_to_bf16(-std::nan("")))));
}

TEST(Bf16, OverflowGoesToInf) {
  const float fmax = std::numeric_limits<float>::max();
  EXPECT_EQ(bf(fmax), 0x7f80);
  EXPECT_EQ(bf(-fmax), 0xff80);
  EXPECT_EQ(bf(std::numeric_limits<float>::infinity()), 0x7f80);
  // Largest finite bf16 is 0x7f7f; the midpoint to 2^128 (0x7f7f8000) is a tie with an odd
  // neighbour, so it rounds up to Inf; one ulp below stays finite.
  EXPECT_EQ(bf(from_bits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(bf(from_bits(0x7f7f7fffu)), 0x7f7f);
  // double_to_bf16: beyond float range is Inf, not FLT_MAX truncated to 0x7f7f.
  EXPECT_EQ(double_to_bf16(1e300).bits, 0x7f80);
  EXPECT_EQ(double_to_bf16(-1e39).bits, 0xff80);
  EXPECT_EQ(double_to_bf16(static_cast<double>(fmax)).bits, 0x7f80);
}

TEST(Bf16, Subnormals) {
  // bf16 subnormals share float's exponent: 0x0001 is 2^-133.
  EXPECT_EQ(bf16_to_float(bf16{0x0001}), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(bf(std::ldexp(1.0f, -126)), 0x0080);  // smallest normal
  // Half of 2^-133 (float bits 0x00008000) is a tie with 0 (even): rounds to +0.
  EXPECT_EQ(bf(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(bf(from_bits(0x00008001u)), 0x0001);
  // 1.5 * 2^-133 is a tie between 0x0001 (odd) and 0x0002: rounds to 0x0002.
  EXPECT_EQ(bf(from_bits(0x00018000u)), 0x0002);
  // The smallest float subnormal rounds to zero with its sign.
  EXPECT_EQ(bf(from_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(bf(from_bits(0x80000001u)), 0x8000);
  // The largest bf16 subnormal rounds up into the normals when just past the midpoint.
  EXPECT_EQ(bf(from_bits(0x007f8001u)), 0x0080);
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -133)).bits, 0x0001);
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -134)).bits, 0x0000);  // tie to even zero
  EXPECT_EQ(double_to_bf16(std::ldexp(1.0, -134) * (1 + 1e-12)).bits, 0x0001);
  EXPECT_EQ(double_to_bf16(1e-300).bits, 0x0000);  // far below float range
}

TEST(Bf16, AllBitPatternsRoundTrip) {
  for (uint32_t k = 0; k < 65536; ++k) {
    uint16_t b = static_cast<uint16_t>(k);
    float f = bf16_to_float(bf16{b});
    double expect = decode_bf16(b);
    if (std::isnan(expect)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << k;
      uint16_t back = bf(f);
      ASSERT_TRUE(std::isnan(bf16_to_float(bf16{back}))) << std::hex << k;
      ASSERT_EQ(back, b | 0x0040) << std::hex << k;  // payload kept, quiet bit set
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expect) << std::hex << k;
    ASSERT_EQ(std::signbit(f), (k >> 15) != 0) << std::hex << k;  // -0 stays -0
    ASSERT_EQ(bf(f), b) << std::hex << k;
    ASSERT_EQ(double_to_bf16(expect).bits, b) << std::hex << k;
    // load/store through a buffer agree with the conversions.
    uint16_t cell = 0;
    store(DType::BF16, &cell, 0, expect);
    ASSERT_EQ(cell, b);
    ASSERT_EQ(load(DType::BF16, &cell, 0), expect);
  }
}

TEST(Bf16, FloatToBf16IsNearestEven) {
  // Every float with the low 16 bits drawn from edges (0, ties, tie +- 1, max) for every upper
  // half, plus random patterns, against the independent reference.
  const NearestRef& ref = nearest_ref();
  std::mt19937_64 rng(12345);
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : lows) {
      float f = from_bits((hi << 16) | lo);
      if (std::isnan(f)) continue;
      ASSERT_EQ(bf(f), ref(static_cast<double>(f))) << std::hex << ((hi << 16) | lo);
    }
    float f = from_bits(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) {
      ASSERT_EQ(bf(f), ref(static_cast<double>(f)));
    }
  }
}

TEST(Bf16, DoubleRoundingWouldDifferButStoreDoesNot) {
  // v = 1 + 2^-8 + 2^-30: just above the midpoint of 1 and 1 + 2^-7, so the nearest bf16 is
  // 1 + 2^-7 (0x3f81). float(v) = 1 + 2^-8 (2^-30 is under half a float ulp, 2^-24), an exact
  // tie, which ties-to-even sends to 1 (0x3f80). Converting through float would be wrong here.
  double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(bf(static_cast<float>(v)), 0x3f80);  // the double rounding
  EXPECT_EQ(double_to_bf16(v).bits, 0x3f81);     // one rounding
  EXPECT_EQ(nearest_ref()(v), 0x3f81);
  // Just below the midpoint the same trap points the other way for an odd lower neighbour:
  // 1 + 3 * 2^-8 - 2^-30 is nearer 0x3f81, but float() makes it the tie that goes to 0x3f82.
  double w = 1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -30);
  EXPECT_EQ(bf(static_cast<float>(w)), 0x3f82);
  EXPECT_EQ(double_to_bf16(w).bits, 0x3f81);
}

TEST(Bf16, DoubleToBf16IsNearestEven) {
  // Doubles near every kind of bf16 midpoint (where one rounding and two differ), plus random
  // doubles over the whole bf16 range and beyond, against the independent reference.
  const NearestRef& ref = nearest_ref();
  std::mt19937_64 rng(777);
  std::uniform_int_distribution<int> exp_dist(-140, 130);
  std::uniform_int_distribution<int> frac_dist(0, 127);
  std::uniform_int_distribution<int> nudge_dist(-60, 60);
  for (int it = 0; it < 200000; ++it) {
    int e = exp_dist(rng);
    // A midpoint between two adjacent bf16 values (1.frac + half ulp) * 2^e, then nudged by a
    // tiny multiple of its size (0 keeps the exact tie).
    double mid = std::ldexp(1.0 + (frac_dist(rng) + 0.5) / 128.0, e);
    int k = nudge_dist(rng);
    double v = mid + (k == 0 ? 0.0 : std::ldexp(static_cast<double>(k), e - 45));
    if (rng() & 1) v = -v;
    ASSERT_EQ(double_to_bf16(v).bits, ref(v)) << v;
    // A raw random double with its exponent inside or just outside the float range.
    uint64_t bits =
        (rng() & 0x800fffffffffffffull) | (static_cast<uint64_t>(1023 + exp_dist(rng)) << 52);
    double r;
    std::memcpy(&r, &bits, sizeof r);
    ASSERT_EQ(double_to_bf16(r).bits, ref(r)) << r;
  }
}

TEST(Bf16, Fp32StorageRoundsOnce) {
  float cell[2] = {0.f, 0.f};
  double v = 1.0 + std::ldexp(1.0, -30);
  store(DType::F32, cell, 1, v);
  EXPECT_EQ(cell[1], 1.0f);  // 2^-30 is under half a float ulp
  EXPECT_EQ(load(DType::F32, cell, 1), 1.0);
  store(DType::F32, cell, 0, 0.1);
  EXPECT_EQ(load(DType::F32, cell, 0), static_cast<double>(0.1f));
}

TEST(Bf16, LoadRowAgreesWithLoad) {
  // Every bf16 pattern and a spread of floats, read as rows from an odd offset.
  std::vector<uint16_t> halves(65536 + 3);
  for (size_t k = 0; k < halves.size(); ++k) halves[k] = static_cast<uint16_t>(k * 40503u);
  std::vector<double> out(65536);
  load_row(DType::BF16, halves.data(), 3, 65536, out.data());
  for (int k = 0; k < 65536; ++k) {
    double want = load(DType::BF16, halves.data(), 3 + k);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[k])) << k;
    } else {
      ASSERT_EQ(out[k], want) << k;
    }
  }
  std::vector<float> floats(1000);
  std::mt19937_64 rng(9);
  for (float& f : floats) f = std::ldexp(static_cast<float>(rng() % 100000) - 50000.f, -20);
  std::vector<double> fout(990);
  load_row(DType::F32, floats.data(), 10, 990, fout.data());
  for (int k = 0; k < 990; ++k) ASSERT_EQ(fout[k], load(DType::F32, floats.data(), 10 + k));
}

TEST(Bf16, UnknownDtypeIsInvalidInput) {
  float cell = 0.f;
  DType bogus = static_cast<DType>(7);
  try {
    load(bogus, &cell, 0);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "dtype");
    EXPECT_EQ(e.index(), -1);
  }
  EXPECT_THROW(store(bogus, &cell, 0, 1.0), InvalidInput);
  double out = 0;
  EXPECT_THROW(load_row(bogus, &cell, 0, 1, &out), InvalidInput);
}

}  // namespace
}  // namespace mlaverify::model

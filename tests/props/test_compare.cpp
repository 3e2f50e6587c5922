// Comparator tests: a planted error is reported at its exact (request, query, head, column), NaN
// counts as a failure, bit comparison sees one flipped bit, and the derived bound is not vacuous.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/attention.h"
#include "model/model_backend.h"
#include "props/compare.h"

namespace mlaverify::props {
namespace {

Case small_case() {
  Case c;
  c.requests = {{{-1, 0, 0, 1}, 65}, {{-1, 0}, 3}};
  c.num_heads = 2;
  c.seed = 99;
  return c;
}

struct Fixture {
  model::VerifyBatch batch;
  model::RefResult ref;
  RunOutput out;
};

Fixture run_model(const Case& c) {
  model::VerifyBatch b = build_batch(c);
  model::RefResult ref = model::reference_verify(b.params());
  model::ModelBackend m;
  RunOutput out = run_backend(m, b);
  return {std::move(b), std::move(ref), std::move(out)};
}

TEST(Compare, ModelOutputPassesWithOnlyOutputRounding) {
  Fixture f = run_model(small_case());
  Comparison c = compare_to_model(f.batch, f.out, f.ref);
  EXPECT_TRUE(c.pass) << c.to_string();
  // The model backend differs from its double result only by the bf16 rounding of o (and the
  // float rounding of lse): relative 2^-8 per element, 2^-24 on lse.
  for (int64_t k = 0; k < static_cast<int64_t>(f.out.o.size()) &&
                      k < static_cast<int64_t>(f.batch.real_tokens()) * 2 * kLatentDim;
       ++k) {
    EXPECT_LE(std::fabs(f.out.o[static_cast<size_t>(k)] - f.ref.o_lat[static_cast<size_t>(k)]),
              kBf16Unit * std::fabs(f.ref.o_lat[static_cast<size_t>(k)]));
  }
  EXPECT_GT(c.cosine, 0.9999);
}

TEST(Compare, PlantedErrorIsLocated) {
  Fixture f = run_model(small_case());
  // Request 1, query 1 (token 4 + 1 = 5), head 1, column 300.
  const int64_t token = 5;
  Tolerance tol = derive_tolerance(f.batch, 1);
  size_t at = (static_cast<size_t>(token) * 2 + 1) * kLatentDim + 300;
  f.out.o[at] += static_cast<float>(3.0 * tol.o_abs + 1.0);
  Comparison c = compare_to_model(f.batch, f.out, f.ref);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.violations, 1);
  EXPECT_EQ(c.worst.request, 1);
  EXPECT_EQ(c.worst.query, 1);
  EXPECT_EQ(c.worst.token, token);
  EXPECT_EQ(c.worst.head, 1);
  EXPECT_EQ(c.worst.column, 300);
  EXPECT_NE(c.to_string().find("request 1, query 1 = token 5, head 1, column 300"),
            std::string::npos)
      << c.to_string();
}

TEST(Compare, NanIsAFailure) {
  Fixture f = run_model(small_case());
  f.out.o[7] = std::nanf("");
  Comparison c = compare_to_model(f.batch, f.out, f.ref);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_EQ(c.worst.column, 7);
  Fixture g = run_model(small_case());
  g.out.lse[3] = std::nanf("");
  Comparison d = compare_to_model(g.batch, g.out, g.ref);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.worst_lse.token, 1);
  EXPECT_EQ(d.worst_lse.head, 1);
}

TEST(Compare, LseErrorBeyondBound) {
  Fixture f = run_model(small_case());
  Tolerance tol = derive_tolerance(f.batch, 0);
  f.out.lse[2] += static_cast<float>(2.0 * tol.lse_abs + 1e-3);
  Comparison c = compare_to_model(f.batch, f.out, f.ref);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.worst_lse.token, 1);
  EXPECT_EQ(c.worst_lse.head, 0);
}

TEST(Compare, OneFlippedBitIsSeen) {
  Fixture f = run_model(small_case());
  RunOutput other = f.out;
  EXPECT_TRUE(compare_bits(f.batch, f.out, other).pass);
  uint32_t u;
  std::memcpy(&u, &other.o[1000], 4);
  u ^= 1u << 16;  // the lowest bf16 mantissa bit
  std::memcpy(&other.o[1000], &u, 4);
  Comparison c = compare_bits(f.batch, f.out, other);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.violations, 1);
  EXPECT_EQ(c.worst.token, 0);
  EXPECT_EQ(c.worst.head, 1);
  EXPECT_EQ(c.worst.column, 1000 - kLatentDim);
}

// The bound must be able to fail: for unit-scale data and a short prefix it is a few percent of
// max|V| (the Cauchy-Schwarz score term dominates: gamma_576 * sm_scale * |q| |k| ~ 576 * 2^-24 *
// 0.135 * 24 * 24 ~ 3e-3, doubled through the softmax, plus 2^-8 for bf16(P)), so an error of a
// tenth of max|V| is always reported.
TEST(Compare, BoundIsNotVacuous) {
  Fixture f = run_model(small_case());
  for (int32_t i = 0; i < 2; ++i) {
    Tolerance tol = derive_tolerance(f.batch, i);
    VerifyParams p = f.batch.params();
    double vmax = 0, row[kRowDim];
    RequestView rv = request_view(f.batch, i);
    for (int64_t j = 0; j < rv.prefix_len + rv.draft_nodes; ++j) {
      read_key(p, i, j, row);
      for (int k = 0; k < kLatentDim; ++k) vmax = std::max(vmax, std::fabs(row[k]));
    }
    EXPECT_LT(tol.o_abs, 0.1 * vmax) << tol.derivation;
    EXPECT_GT(tol.o_abs, kBf16Unit * vmax) << tol.derivation;  // bf16(P) alone costs 2^-8 vmax
    EXPECT_LT(tol.lse_abs, 0.05) << tol.derivation;
  }
}

TEST(Compare, RunsWithinBoundOfEachOther) {
  Fixture f = run_model(small_case());
  RunOutput other = f.out;
  EXPECT_TRUE(compare_runs_within(f.batch, f.out, other).pass);
  other.o[kLatentDim * 3 + 5] += 1.0f;
  Comparison c = compare_runs_within(f.batch, f.out, other);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.worst.token, 1);
  EXPECT_EQ(c.worst.head, 1);
  EXPECT_EQ(c.worst.column, 5);
}

// split_invariance's comparison of num_splits 1 against k: each run is within the bound of its
// own launch (the CPU backend's declaration counts k + 1 partials for k splits), so a difference
// between tol(1) + tol(1) and tol(1) + tol(k) is within bound; 2 tol(1) alone would call it a
// failure. Outputs are zero but for one element d, so the element test reads
// |d| <= o_tol + 2 u_o |d|.
TEST(Compare, RunsOfDifferentLaunchesEachKeepTheirBound) {
  Case one = small_case();
  one.num_splits = 1;
  Case many = small_case();
  many.num_splits = 8;
  model::VerifyBatch b1 = build_batch(one), b8 = build_batch(many);
  Capabilities k;
  k.honours_num_splits = true;
  const Tolerance t1 = derive_tolerance(b1, 0, k), t8 = derive_tolerance(b8, 0, k);
  ASSERT_GT(t8.o_abs, t1.o_abs) << t8.derivation;  // 9 partials against 2
  const double u = t1.o_unit;
  const double lo = 2.0 * t1.o_abs * (1.0 + 2.0 * u), hi = (t1.o_abs + t8.o_abs) * (1.0 + 2.0 * u);
  model::ModelBackend m;
  RunOutput o1 = run_backend(m, b1);
  std::fill(o1.o.begin(), o1.o.end(), 0.0f);
  RunOutput o8 = o1;
  const float d = static_cast<float>((lo + hi) / 2.0 / (1.0 - 2.0 * u));
  ASSERT_GT(static_cast<double>(d) * (1.0 - 2.0 * u), lo);
  ASSERT_LT(static_cast<double>(d) * (1.0 - 2.0 * u), hi);
  o8.o[7] = d;  // token 0, head 0, column 7: request 0
  EXPECT_TRUE(compare_runs_within(b8, o8, b1, o1, k).pass);
  EXPECT_TRUE(compare_runs_within(b1, o1, b8, o8, k).pass);
  // One launch's bound for both (the old split_invariance) rejects it.
  EXPECT_FALSE(compare_runs_within(b1, o8, o1, k).pass);
}

// The bit comparison's report over every element, the differing ones included (it once left them
// out of the reference norm and the cosine: "relative Frobenius 56, cosine 1"). Expected values
// computed here from the two outputs directly.
TEST(Compare, BitsReportCountsDifferingElements) {
  Fixture f = run_model(small_case());
  RunOutput other = f.out;
  const size_t at = (static_cast<size_t>(5) * 2 + 1) * kLatentDim + 300;  // token 5, head 1
  other.o[at] = 1000.0f;
  const int64_t real = f.batch.real_tokens();
  double ref2 = 0, out2 = 0, dot = 0, diff2 = 0, ref_max = 0;
  for (size_t k = 0; k < static_cast<size_t>(real) * 2 * kLatentDim; ++k) {
    const double x = other.o[k], r = f.out.o[k];
    ref2 += r * r;
    out2 += x * x;
    dot += x * r;
    diff2 += (x - r) * (x - r);
    ref_max = std::max(ref_max, std::fabs(r));
  }
  Comparison c = compare_bits(f.batch, other, f.out);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.violations, 1);
  EXPECT_EQ(c.nonfinite, 0);
  EXPECT_EQ(c.worst.token, 5);
  EXPECT_EQ(c.worst.head, 1);
  EXPECT_EQ(c.worst.column, 300);
  const double d = 1000.0 - f.out.o[at];
  EXPECT_DOUBLE_EQ(c.max_abs, std::fabs(d));
  EXPECT_DOUBLE_EQ(c.worst_err, std::fabs(d));
  EXPECT_NEAR(c.rel_frobenius, std::sqrt(diff2 / ref2), 1e-12 * std::sqrt(diff2 / ref2));
  EXPECT_NEAR(c.max_abs_rel, std::fabs(d) / ref_max, 1e-12);
  EXPECT_NEAR(c.cosine, dot / std::sqrt(ref2 * out2), 1e-12);
  EXPECT_LT(c.cosine, 0.99);  // one element of 1000 against unit-scale values dominates
  // A NaN where the reference is finite: non-finite, and kept out of the aggregates.
  RunOutput nan = f.out;
  nan.o[at] = std::nanf("");
  Comparison n = compare_bits(f.batch, nan, f.out);
  EXPECT_EQ(n.violations, 1);
  EXPECT_EQ(n.nonfinite, 1);
  EXPECT_EQ(n.rel_frobenius, 0.0);
  EXPECT_DOUBLE_EQ(n.cosine, 1.0);
}

// The declaration sets the bound: the CPU's (2^-24, num_splits honoured) is tighter than a
// foreign kernel's defaults (2^-23, 64 partials); partials follow honours_num_splits.
TEST(Compare, DeclarationSetsTheBound) {
  Fixture f = run_model(small_case());
  Capabilities cpu;
  cpu.numerics.accumulate_unit = kF32Unit;
  cpu.honours_num_splits = true;
  const Capabilities foreign;
  VerifyParams p = f.batch.params();
  EXPECT_EQ(declared_partials(cpu, p), p.num_splits + 1);
  EXPECT_EQ(declared_partials(foreign, p), 64);
  Capabilities eight = foreign;
  eight.numerics.max_partials = 8;
  EXPECT_EQ(declared_partials(eight, p), 8);
  for (int32_t i = 0; i < 2; ++i) {
    Tolerance a = derive_tolerance(f.batch, i, cpu), b = derive_tolerance(f.batch, i, foreign);
    EXPECT_LT(a.o_abs, b.o_abs) << a.derivation << "\n" << b.derivation;
    EXPECT_LT(a.lse_abs, b.lse_abs);
    EXPECT_EQ(a.o_unit, kBf16Unit);
  }
  EXPECT_EQ(output_unit(DType::F32), kF32Unit);
}

// The probable bound is far below the worst case on a long prefix (the 2^-8 of each key's bf16 P
// adds up like a random walk, not linearly), a correct output stays inside it, and an error
// inside the worst-case bound but beyond the probable one fails at its place.
TEST(Compare, ProbableBoundTighterAndLocated) {
  Case c;
  c.requests = {{{-1, 0, 1}, 700}};
  c.num_heads = 2;
  c.seed = 7;
  Fixture f = run_model(c);
  const Capabilities foreign;
  Tolerance tol = derive_tolerance(f.batch, 0, foreign);
  ProbableBound pb = probable_bound(f.batch.params(), 0, foreign.numerics, 64);
  double largest = 0;
  for (double b : pb.o) largest = std::max(largest, b);
  EXPECT_LT(largest, tol.o_abs / 4) << tol.derivation;
  EXPECT_GT(largest, 0.0);
  Comparison ok = compare_to_model(f.batch, f.out, f.ref, foreign);
  EXPECT_TRUE(ok.pass) << ok.to_string();
  EXPECT_GT(ok.worst_probable_ratio, 0.0);
  EXPECT_LT(ok.worst_probable_ratio, 1.0);
  // Query 1, head 1, column 77: 3x its probable bound, still well inside the worst case.
  const size_t at = (static_cast<size_t>(1) * 2 + 1) * kLatentDim + 77;
  const double r = f.ref.o_lat[at];
  const double probable = pb.at(1, 1, 77) + kBf16Unit * std::fabs(r);
  f.out.o[at] = static_cast<float>(r + 3.0 * probable);
  ASSERT_LT(3.0 * probable + kBf16Unit * std::fabs(r), tol.o_abs);
  Comparison bad = compare_to_model(f.batch, f.out, f.ref, foreign);
  EXPECT_FALSE(bad.pass);
  EXPECT_EQ(bad.violations, 0);
  EXPECT_EQ(bad.improbable, 1);
  EXPECT_EQ(bad.worst.query, 1);
  EXPECT_EQ(bad.worst.head, 1);
  EXPECT_EQ(bad.worst.column, 77);
  EXPECT_NE(bad.to_string().find("beyond the probable bound"), std::string::npos);
}

}  // namespace
}  // namespace mlaverify::props

// Comparator tests: a planted error is reported at its exact (request, query, head, column), NaN
// counts as a failure, bit comparison sees one flipped bit, and the derived bound is not vacuous.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mlaverify::props

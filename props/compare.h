// Comparisons that point (STYLE.md): relative Frobenius error, max abs error, cosine and the worst
// (request, query, head, column), against the model with bounds derived from the arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/batch.h"
#include "props/case.h"

namespace mlaverify::props {

// Unit roundoffs. bf16 keeps 8 significant bits (7 stored + the implicit one), so round-to-nearest
// is off by at most half an ulp: |x - bf16(x)| <= 2^-8 |x|. (The original brief wrote 2^-9 for an
// "8-bit mantissa"; with 7 stored bits the relative bound is 2^-8 — at x = 1 + 2^-8 the error is
// exactly 2^-8. Using 2^-9 would flag correct kernels; docs/spec.md §6.2.) fp32: 24 significant
// bits, 2^-24.
inline constexpr double kBf16Unit = 0x1.0p-8;
inline constexpr double kF32Unit = 0x1.0p-24;

// Higham's gamma_n = n u / (1 - n u): the relative bound of an n-term recursive fp32 sum or dot.
double gamma_f32(double n);

// Where a comparison is worst. query is the index within the request (its draft node); column is
// -1 for an lse entry.
struct WorstIndex {
  int32_t request = -1;
  int64_t query = -1;
  int64_t token = -1;
  int32_t head = -1;
  int32_t column = -1;
  std::string to_string() const;
};

// Per-request error bounds derived for the split_plan.h algorithm (see compare.cpp for each term).
struct Tolerance {
  double o_abs = 0;        // absolute, plus kBf16Unit * |ref| per element for the final rounding
  double lse_abs = 0;      // absolute, on the natural-log lse
  std::string derivation;  // the terms, for the report
};

// One comparison, over the real requests of a batch.
struct Comparison {
  double rel_frobenius = 0;  // ||o - ref||_F / ||ref||_F over every compared element
  double max_abs = 0;        // max |o - ref|
  double max_abs_rel = 0;    // max_abs / max |ref|
  double cosine = 1;         // <o, ref> / (||o|| ||ref||)
  double max_lse_err = 0;    // max |lse - ref_lse|
  int64_t nonfinite = 0;     // NaN or Inf in o or lse where ref is finite
  int64_t violations = 0;    // elements beyond their bound
  WorstIndex worst;          // the element furthest beyond (or closest to) its bound
  double worst_err = 0;      // |o - ref| there
  double worst_bound = 0;    // its bound
  WorstIndex worst_lse;
  bool pass = true;
  std::string to_string() const;
};

// The bound for request i of `batch` (its keys, queries and sm_scale read from the params).
Tolerance derive_tolerance(model::VerifyBatch& batch, int32_t request);

// Backend output vs the model (double) for every real request, each with its own tolerance.
Comparison compare_to_model(model::VerifyBatch& batch, const RunOutput& out,
                            const model::RefResult& ref);

// Two runs of (possibly different) algorithms that should agree, each within `tol_of(i)` of the
// exact result: |a - b| <= 2 tol(1 + 2^-7) + 2^-7 max(|a|, |b|) (triangle inequality through the
// unknown exact value r, with |r| <= max(|a|, |b|) + tol). Real requests only.
// `requests` limits it to those real requests (all when empty).
Comparison compare_runs_within(model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                               const std::vector<int32_t>& requests = {});

// Bit-for-bit comparison of requests `requests` (all real ones when empty; padded ones may be
// named). NaN payloads count: a property of the form "must be identical" means the bits.
Comparison compare_bits(const model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                        const std::vector<int32_t>& requests = {});
// The same over explicit (request index, token range) pairs, for batches not held in a VerifyBatch.
Comparison compare_bits(const std::vector<std::pair<int32_t, RequestView>>& views,
                        const RunOutput& a, const RunOutput& b);

}  // namespace mlaverify::props

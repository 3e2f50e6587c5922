// Comparisons that point (STYLE.md): relative Frobenius error, max abs error, cosine and the worst
// (request, query, head, column), against the model with bounds derived from the arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mlaverify/backend.h"
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

// Partials a backend's result may merge per (token, head): num_splits + 1 when it declares
// honours_num_splits (split_plan.h: the prefix chunks and the draft block), else
// Numerics::max_partials (0 = unknown, taken as 64).
int32_t declared_partials(const Capabilities& declared, const VerifyParams& p);

// The unit of the final output rounding: 2^-8 for a bf16 o_lat, 2^-24 for f32.
double output_unit(DType o_dtype);

// Per-request worst-case error bounds, derived from the backend's declared arithmetic
// (Capabilities::numerics, and how many partials it merges; see compare.cpp for each term).
struct Tolerance {
  double o_abs = 0;        // absolute, plus o_unit * |ref| per element for the final rounding
  double o_unit = kBf16Unit;  // the output rounding (output_unit(o_dtype))
  double lse_abs = 0;      // absolute, on the natural-log lse
  std::string derivation;  // the terms, for the report
};

// The probable bound (compare.cpp, "The probable bound"): per element, the error a kernel of the
// declared arithmetic exceeds with probability at most kFalseAlarm over a whole campaign of at
// most kCampaignComparisons element comparisons, under the standard rounding model (every
// round-to-nearest rounding an independent perturbation, mean zero given all that came before,
// bounded by its unit; directed parts and exp/log errors charged at their worst). The worst-case
// Tolerance stays the hard limit; this is the second, statistical one.
inline constexpr double kFalseAlarm = 1e-6;
inline constexpr double kCampaignComparisons = 0x1.0p40;
// sqrt(2 ln(2 N / alpha)): the Azuma-Hoeffding multiple of the rms bound that one comparison
// exceeds with probability alpha / N (9.19 for N = 2^40, alpha = 1e-6).
double probable_lambda();

struct ProbableBound {
  int64_t q_begin = 0;
  int32_t draft_nodes = 0;
  int32_t heads = 0;
  // [D_i, H, 512] |o - ref| <= o[...] + o_unit * |ref| (the output rounding added per element by
  // the comparison); +inf where no probable bound is derived (a fully masked row, or scores so
  // large that the first-order model does not hold: the worst-case bound alone applies there).
  std::vector<double> o;
  std::vector<double> lse;  // [D_i, H]
  double at(int64_t q, int32_t h, int32_t k) const {
    return o[(static_cast<size_t>(q) * heads + h) * kLatentDim + k];
  }
  double lse_at(int64_t q, int32_t h) const { return lse[static_cast<size_t>(q) * heads + h]; }
};
// Request i of p (host pointers, validated), for a backend declaring `numerics` that merges at
// most `partials` partials per row.
ProbableBound probable_bound(const VerifyParams& p, int32_t request, const Numerics& numerics,
                             int32_t partials);

// One comparison, over the real requests of a batch.
struct Comparison {
  double rel_frobenius = 0;  // ||o - ref||_F / ||ref||_F over every compared element
  double max_abs = 0;        // max |o - ref|
  double max_abs_rel = 0;    // max_abs / max |ref|
  double cosine = 1;         // <o, ref> / (||o|| ||ref||)
  double max_lse_err = 0;    // max |lse - ref_lse|
  int64_t nonfinite = 0;     // NaN or Inf in o or lse where ref is finite
  int64_t violations = 0;    // elements beyond their worst-case bound (the hard limit)
  int64_t improbable = 0;    // elements within it but beyond the probable bound (compare_to_model)
  double worst_hard_ratio = 0;      // max |o - ref| / worst-case bound (o elements)
  double worst_probable_ratio = 0;  // max |o - ref| / probable bound (o elements; 0: none derived)
  double worst_lse_probable_ratio = 0;
  WorstIndex worst;          // the element furthest beyond (or closest to) its bound
  double worst_err = 0;      // |o - ref| there
  double worst_bound = 0;    // its bound (the tighter of the two where both apply)
  WorstIndex worst_lse;
  bool pass = true;
  std::string to_string() const;
};

// The worst-case bound for request i of `batch` (its keys, queries and sm_scale read from the
// params) for a backend that declares `declared` (default: a foreign kernel's defaults).
Tolerance derive_tolerance(model::VerifyBatch& batch, int32_t request,
                           const Capabilities& declared = {});
// The same from the params (host pointers, validated) and the request's token ranges.
Tolerance derive_tolerance(const VerifyParams& p, int32_t request, const RequestView& view,
                           const Capabilities& declared = {});

// Backend output vs the model (double) for every real request: every element within its
// worst-case bound (violations) and within the probable bound (improbable); each request with
// its own tolerance, derived from `declared` (backend.capabilities()). The lse is compared only
// when the backend declares writes_lse.
Comparison compare_to_model(model::VerifyBatch& batch, const RunOutput& out,
                            const model::RefResult& ref, const Capabilities& declared = {});

// Two runs of (possibly different) algorithms that should agree, each within `tol` of the exact
// result: |a - b| <= 2 tol (1 + 2 u_o) + 2 u_o max(|a|, |b|) (triangle inequality through the
// unknown exact value r, with |r| <= max(|a|, |b|) + tol; u_o the output unit). Real requests
// only (`requests` limits it to those; all when empty); the worst-case bound of `declared` (the
// probable one is not applied here), and the lse only when `declared` says the backend writes it.
Comparison compare_runs_within(model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                               const Capabilities& declared = {},
                               const std::vector<int32_t>& requests = {});
// The same over explicit (request index, token range) pairs of `p`'s batch (serving states).
Comparison compare_runs_within(const VerifyParams& p,
                               const std::vector<std::pair<int32_t, RequestView>>& views,
                               const RunOutput& a, const RunOutput& b,
                               const Capabilities& declared);
// Two runs of the same requests launched differently (split_invariance: num_splits 1 against
// k), a from batch_a and b from batch_b: each within its own derived tolerance of the exact
// result, so |a - b| <= (tol_a + tol_b)(1 + 2 u_o) + 2 u_o max(|a|, |b|) (tol_b counts the
// partials of b's launch, not a's).
Comparison compare_runs_within(model::VerifyBatch& batch_a, const RunOutput& a,
                               model::VerifyBatch& batch_b, const RunOutput& b,
                               const Capabilities& declared = {});

// Bit-for-bit comparison of requests `requests` (all real ones when empty; padded ones may be
// named). NaN payloads count: a property of the form "must be identical" means the bits. `b` is
// the reference of the report: every finite element of both enters rel_frobenius, cosine and
// max_abs_rel, the differing ones included. The lse is compared only when `declared`
// (backend.capabilities()) says the backend writes it.
Comparison compare_bits(const model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                        const Capabilities& declared = {},
                        const std::vector<int32_t>& requests = {});
// The same over explicit (request index, token range) pairs, for batches not held in a VerifyBatch.
Comparison compare_bits(const std::vector<std::pair<int32_t, RequestView>>& views,
                        const RunOutput& a, const RunOutput& b, const Capabilities& declared);

}  // namespace mlaverify::props

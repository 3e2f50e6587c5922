// Replaying a server dump: the model's answer for the very inputs the server's kernel read, an
// element-wise error bound for any bf16-in, fp32-accumulate, bf16-out kernel, and the comparison
// of the server's (or a backend's) o and lse with it, per request, real and padded rows apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlaverify/verify_params.h"

namespace mlaverify::dump {

// What the bound assumes of the kernel that produced the outputs (the terms a foreign kernel's
// arithmetic could change; docs/spec.md §6 and dump/replay.cpp give the derivation).
struct KernelAssumptions {
  // Unit of one fp32 accumulation step. Tensor cores add aligned products with truncation
  // rather than round-to-nearest, so one step may be off by a whole ulp: 2^-23, not 2^-24.
  double accumulate_unit = 0x1.0p-23;
  // Partials a split-KV merge may combine (SGLang's Triton extend kernel does not split; a split
  // kernel with more partials than this is outside the bound).
  int32_t max_partials = 64;
  // Relative error of the kernel's exp (ex2.approx is ~2^-22.5; glibc expf ~2^-23).
  double exp_rel = 0x1.0p-21;
};

// The element-wise bound's per-row ingredients, computed in double from the inputs the kernel
// read: a_abs[t, h, k] = sum_j w_j |v_jk| (the exact softmax weights against |V|), and the row's
// score-error scale. Rows are [T, H]; a_abs is [T, H, 512].
struct BoundTerms {
  std::vector<double> o_coeff;  // [T, H]: |o - ref| <= o_coeff * a_abs + 2^-8 |ref| (bf16 out)
  std::vector<double> a_abs;    // [T, H, 512]
  std::vector<double> lse_abs;  // [T, H]: |lse - ref| <= lse_abs
  double worst_o_coeff = 0;     // for the report
};

// Where V is read from, when a reading reads it apart from the scores' latent (diagnose's
// "V from the wrong columns"): V[k] = row[v_offset + k] of the same cache row. 0: V is c.
struct ValueReading {
  int64_t v_offset = 0;  // elements from the latent's start (pool) or the row's start (k_extend)
  int64_t v_stride = 0;  // elements between slots' V (pool) and rows' V (k_extend); 0: as c
  bool same_as_c() const { return v_offset == 0 && v_stride == 0; }
};

// The bound's terms for every row of p (host pointers, validated by the caller), and, as a
// by-product of the same exact softmax weights, o under `value` (o_value [T, H, 512]; equal to
// the model's o to double rounding when value.v_offset is 0, which a test checks).
BoundTerms bound_terms(const VerifyParams& p, const KernelAssumptions& assume,
                       const ValueReading& value = {}, std::vector<double>* o_value = nullptr);

// One element-wise comparison of outputs against a reference, over the requests of a batch.
struct RequestResult {
  int32_t request = 0;
  bool padded = false;
  int32_t draft_nodes = 0;
  int64_t prefix_len = 0;
  double rel_frobenius = 0;  // ||o - ref||_F / ||ref||_F over the request's rows
  double max_abs = 0;        // max |o - ref|
  double max_ref = 0;        // max |ref|
  int64_t over = 0;          // elements beyond their bound (o and lse)
  int64_t nonfinite = 0;     // NaN or Inf where the reference is finite
  double worst_ratio = 0;    // max |o - ref| / bound
  int64_t worst_token = -1;
  int32_t worst_head = -1, worst_column = -1;  // column -1: the lse
  double worst_got = 0, worst_ref = 0, worst_bound = 0;
  double lse_err = 0;  // max |lse - ref| (when compared)
  bool pass() const { return over == 0 && nonfinite == 0; }
};

struct Comparison {
  std::vector<RequestResult> requests;  // every request, padded ones flagged
  bool lse_compared = false;
  std::vector<float> ratio;  // [T, H, 512] |o - ref| / bound, for pictures
  // Over real requests only: padded rows never fail a comparison.
  bool pass() const;
  double worst_ratio() const;
  double rel_frobenius() const;  // over every real element
  const RequestResult* worst() const;  // the real request with the worst ratio
  double rel_frob_all = 0;
};

// Compares o [T, H, 512] (and lse [T, H] when not empty) with ref_o [T, H, 512] and ref_lse
// [T, H], element by element against `bound`, request by request over p's metadata; requests
// >= real_bs are padded (reported, never failing).
Comparison compare(const VerifyParams& p, int32_t real_bs, const std::vector<float>& o,
                   const std::vector<float>& lse, const std::vector<double>& ref_o,
                   const std::vector<double>& ref_lse, const BoundTerms& bound);

}  // namespace mlaverify::dump

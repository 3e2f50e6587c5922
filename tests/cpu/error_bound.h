// Worst-case error bounds of the CPU backend against the double-precision model, derived from its
// documented arithmetic (cpu/cpu_backend.h), and the per-request comparison the tests assert on.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/attention.h"
#include "model/storage.h"

namespace mlaverify::cpu::testing {

inline constexpr double kU = 0x1.0p-24;     // fp32 unit roundoff
// bf16 unit roundoff: 8 significant bits (7 stored + 1 implicit), so an ulp at 1 is 2^-7 and
// rounding to nearest moves a value by at most 2^-8 of itself (not 2^-9: docs/spec.md §6.2).
inline constexpr double kBf16U = 0x1.0p-8;

// gamma_n = n u / (1 - n u): the classic bound on n chained fp32 roundings (Higham, Thm 3.1).
inline double gamma_n(double n) { return n * kU / (1.0 - n * kU); }

// What the bound needs to know about one request: sizes and the magnitudes of its operands.
struct RequestMagnitudes {
  int64_t prefix_len = 0;
  int32_t draft_nodes = 0;
  double q_norm = 0;          // max over (token, head) of ||[q_lat | q_pe]||_2 (as operands)
  double key_norm = 0;        // max over the request's keys of ||[c | k_pe]||_2 (as operands)
  std::vector<double> v_max;  // [512] max over the request's keys of |c_k|
};

// One stored element of a bf16 / fp32 buffer, widened exactly.
inline float stored_value(DType dtype, const void* base, int64_t index) {
  return static_cast<float>(model::load(dtype, base, index));  // exact: bf16 and fp32 fit a float
}

// Reads request i's operands through p (any layout, dtype, draft source), as a backend would.
inline RequestMagnitudes magnitudes(const VerifyParams& p, int32_t request) {
  RequestMagnitudes m;
  const RequestExtent e = request_extent(p, request);
  m.prefix_len = e.prefix_len;
  m.draft_nodes = e.draft_nodes;
  m.v_max.assign(kLatentDim, 0.0);
  // Norms of both the stored and the bf16-rounded values (equal for bf16-exact operands).
  auto norm = [](const float* row) {  // row: [576]
    double stored = 0, rounded = 0;
    for (int k = 0; k < kRowDim; ++k) {
      stored += double(row[k]) * row[k];
      rounded += double(round_bf16(row[k])) * round_bf16(row[k]);
    }
    return std::sqrt(std::max(stored, rounded));
  };
  float row[kRowDim];  // [576] latent first
  auto add_key = [&] {
    m.key_norm = std::max(m.key_norm, norm(row));
    for (int k = 0; k < kLatentDim; ++k) {
      m.v_max[k] =
          std::max({m.v_max[k], std::fabs(double(row[k])), std::fabs(double(round_bf16(row[k])))});
    }
  };
  auto read_slot = [&](int64_t slot) {
    for (int k = 0; k < kLatentDim; ++k) {
      row[k] = stored_value(p.kv_dtype, p.kv_pool, p.kv_layout.latent_index(slot) + k);
    }
    for (int k = 0; k < kRopeDim; ++k) {
      row[kLatentDim + k] = stored_value(p.kv_dtype, p.kv_pool, p.kv_layout.rope_index(slot) + k);
    }
  };
  for (int64_t j = 0; j < e.prefix_len; ++j) {
    read_slot(p.kv_indices[e.kv_begin + j]);
    add_key();
  }
  for (int64_t j = 0; j < e.draft_nodes; ++j) {
    if (p.draft_source == DraftKvSource::CacheSlots) {
      read_slot(p.kv_indices[e.kv_begin + e.prefix_len + j]);
    } else {
      for (int k = 0; k < kRowDim; ++k) {
        row[k] = stored_value(p.kv_dtype, p.k_extend, (e.q_begin + j) * p.k_extend_stride + k);
      }
    }
    add_key();
  }
  for (int64_t t = e.q_begin; t < e.q_begin + e.draft_nodes; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      const int64_t base = t * p.q_token_stride + h * p.q_head_stride;
      for (int k = 0; k < kLatentDim; ++k) {
        row[k] = stored_value(p.q_dtype, p.q, base + p.q_latent_offset + k);
      }
      for (int k = 0; k < kRopeDim; ++k) {
        row[kLatentDim + k] = stored_value(p.q_dtype, p.q, base + p.q_rope_offset + k);
      }
      m.q_norm = std::max(m.q_norm, norm(row));
    }
  }
  return m;
}

// What a backend wrote, read back through p.
inline float output_o(const VerifyParams& p, int64_t t, int32_t h, int32_t k) {
  return stored_value(p.o_dtype, p.o_lat, t * p.o_token_stride + h * p.o_head_stride + k);
}
inline float output_lse(const VerifyParams& p, int64_t t, int32_t h) {
  return p.lse[t * p.num_heads + h];
}

struct ErrorBound {
  double o_coeff;  // |o_k - ref_k| <= o_coeff * v_max[k] for every (token, head) of the request
  double lse_abs;  // |lse - ref| for every (token, head) that is not fully masked
};

// The derivation, term by term (u = 2^-24, u_b = 2^-8; first-order terms are summed and the sum
// is then multiplied by (1 + sum) to cover the products of terms):
//  Scores. |s| <= smax = sm_scale ||q|| ||k|| (Cauchy-Schwarz, also bounding sum |q_k c_k|). The
//   CPU's dot product rounds each product once and chains 35 additions per lane plus a 4-level
//   tree, so |dot error| <= gamma_41 sum|q_k k_k| (any order of 576 terms would give gamma_576:
//   the order-agnostic bound a GPU comparison uses); sm_scale * dot adds u |s|. So
//   delta_s = smax (gamma_41 + u). Operands are bf16-exact values (bf16 storage, or fp32 holding
//   bf16 values), which the model reads exactly as the CPU does.
//  Weights. p_j = exp(s_j - m) where m is itself a computed score: the exponent is off by at most
//   2 delta_s plus the subtraction's rounding u |s_j - m| <= 2 u smax; expf is faithful (relative
//   2u). eps_p = expm1(2 delta_s + 2 u smax) + 2u, and a normalized weight p_j / sum p moves by
//   at most 2 eps_p / (1 - eps_p) relative. Since sum_j w_j |v_jk| <= v_max[k], a relative weight
//   error eps moves o_k by at most eps v_max[k].
//  P rounded to bf16 before P @ V while l sums the unrounded p: relative u_b per weight, so
//   u_b v_max[k] (the worst case: all rounding errors of one sign, no 1/sqrt(n) averaging).
//  fp32 accumulation. acc: per tile <= 64 products-and-adds (65 roundings with the product),
//   then acc * alpha + pv (2 per tile): gamma_(65 + 2 tiles) of sum p |v| <= (1 + u_b) l v_max.
//   l: gamma_(64 + 2 tiles). o = acc / l: u. The rescale factors alpha multiply acc and l alike,
//   so their own error cancels in o (not in lse, below).
//  Merge. lse_s carries a computational error delta_c (below, excluding delta_s, which is already
//   in the weights); w_s = exp(lse_s - M) is then off by eps_ws = expm1(2 delta_c + 4 u lmax) + 2u
//   relative, moving o by 2 eps_ws / (1 - eps_ws) v_max; sum_s w_s o_s: gamma_(partials + 1);
//   the division: u.
//  Output rounding to bf16: u_b |o_k| <= u_b v_max[k] (fp32 output: u).
//  lse. A smooth max moves by at most max_j |delta_s_j|. l's relative error: the exp roundings
//   (eps = expm1(2 u smax) + 2u) once per key and once per alpha factor (up to `tiles` of them),
//   and gamma_(64 + 2 tiles) accumulation, so l_rel = (1 + eps)^(tiles + 1)(1 + gamma) - 1 and
//   |log l~ - log l| <= -log(1 - l_rel). log and + m round: 2u (lmax + 1), where
//   lmax = smax + log(N) bounds |lse|. Then the merge: eps_ws + gamma(partials) + 2u (lmax + 1).
inline ErrorBound cpu_error_bound(const RequestMagnitudes& m, double sm_scale, int32_t num_splits,
                                  DType o_dtype) {
  const double smax = sm_scale * m.q_norm * m.key_norm;
  const double keys = static_cast<double>(m.prefix_len + m.draft_nodes);
  const double tiles =
      static_cast<double>(ceil_div(m.prefix_len, kKvTile) + ceil_div(m.draft_nodes, kKvTile));
  const double partials = num_partials(num_splits);
  const double lmax = smax + std::log(std::max(keys, 1.0));

  double delta_s = smax * (gamma_n(41) + kU);
  const double eps_p = std::expm1(2 * delta_s + 2 * kU * smax) + 2 * kU;
  const double weight_in_partial = 2 * eps_p / (1 - eps_p);

  const double eps_exp = std::expm1(2 * kU * smax) + 2 * kU;
  const double l_gamma = gamma_n(64 + 2 * tiles);
  const double l_rel = std::pow(1 + eps_exp, tiles + 1) * (1 + l_gamma) - 1;
  const double delta_c = -std::log1p(-l_rel) + 2 * kU * (lmax + 1);
  const double eps_ws = std::expm1(2 * delta_c + 4 * kU * lmax) + 2 * kU;
  const double weight_merge = 2 * eps_ws / (1 - eps_ws);

  double o_terms = kBf16U                                                   // P to bf16
                   + weight_in_partial + weight_merge                       // weights
                   + gamma_n(65 + 2 * tiles) * (1 + kBf16U) + l_gamma + kU  // acc, l, acc / l
                   + gamma_n(partials + 1) + kU;    // merge sum and division
  o_terms += o_dtype == DType::BF16 ? kBf16U : kU;  // the final rounding of o
  // The first-order weight bound needs eps < 1; beyond that no finite bound follows from it.
  if (eps_p >= 1 || eps_ws >= 1) {
    const double inf = std::numeric_limits<double>::infinity();
    return {inf, inf};
  }
  const double o_coeff = o_terms * (1 + o_terms);

  const double lse_abs = delta_s + delta_c + eps_ws + gamma_n(partials) + 2 * kU * (lmax + 1);
  return {o_coeff, lse_abs * (1 + lse_abs)};
}

// Per-request comparison of a Case's outputs with the model, with diagnostics that point.
struct RequestComparison {
  double rel_frobenius = 0;  // ||o - ref||_F / ||ref||_F over the request's rows
  double rel_frobenius_bound = 0;
  double max_abs_rel = 0;  // max |o - ref| / max |ref|
  double max_abs_rel_bound = 0;
  double lse_err = 0;  // max |lse - ref| over rows that are not fully masked
  double lse_bound = 0;
  int64_t elements_over = 0;      // elements with |o - ref| > o_coeff * v_max[k]
  bool masked_rows_exact = true;  // fully masked rows: o == 0 and lse == -inf exactly
  bool all_finite = true;
  std::string worst;  // "(token t, head h, column k): got x, ref y, bound b"

  bool ok() const {
    return elements_over == 0 && masked_rows_exact && all_finite && lse_err <= lse_bound &&
           rel_frobenius <= rel_frobenius_bound && max_abs_rel <= max_abs_rel_bound;
  }
  std::string describe() const {
    std::ostringstream s;
    s << "rel_frobenius " << rel_frobenius << " (bound " << rel_frobenius_bound
      << "), max_abs/max|ref| " << max_abs_rel << " (bound " << max_abs_rel_bound << "), |lse-ref| "
      << lse_err << " (bound " << lse_bound << "), elements over bound " << elements_over
      << ", masked rows exact " << masked_rows_exact << ", finite " << all_finite << ", worst "
      << worst;
    return s.str();
  }
};

inline RequestComparison compare_request(const VerifyParams& p, const model::RefResult& ref,
                                         int32_t request, const ErrorBound& bound,
                                         const RequestMagnitudes& mag) {
  RequestComparison r;
  const RequestExtent e = request_extent(p, request);
  const int64_t q_begin = e.q_begin;
  const int64_t q_end = q_begin + e.draft_nodes;
  double err2 = 0, ref2 = 0, bound2 = 0, max_err = 0, max_ref = 0, max_bound = 0, worst_ratio = -1;
  for (int64_t t = q_begin; t < q_end; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      const double ref_lse = ref.lse_at(t, h);
      const float lse = output_lse(p, t, h);
      if (ref_lse == -std::numeric_limits<double>::infinity()) {
        if (!(lse == -std::numeric_limits<float>::infinity())) r.masked_rows_exact = false;
        for (int k = 0; k < kLatentDim; ++k) {
          const float o = output_o(p, t, h, k);
          if (o != 0.f || std::signbit(o)) r.masked_rows_exact = false;
        }
        continue;
      }
      if (!std::isfinite(lse)) r.all_finite = false;
      r.lse_err = std::max(r.lse_err, std::fabs(double(lse) - ref_lse));
      for (int k = 0; k < kLatentDim; ++k) {
        const double got = output_o(p, t, h, k), want = ref.o(t, h, k);
        if (!std::isfinite(got)) r.all_finite = false;
        const double err = std::fabs(got - want);
        const double b = bound.o_coeff * mag.v_max[k];
        if (err > b) ++r.elements_over;
        err2 += err * err;
        ref2 += want * want;
        bound2 += b * b;
        max_err = std::max(max_err, err);
        max_ref = std::max(max_ref, std::fabs(want));
        max_bound = std::max(max_bound, b);
        const double ratio = b > 0 ? err / b : err;
        if (ratio > worst_ratio) {
          worst_ratio = ratio;
          std::ostringstream s;
          s << "(token " << t << ", head " << h << ", column " << k << "): got " << got << ", ref "
            << want << ", bound " << b;
          r.worst = s.str();
        }
      }
    }
  }
  // Frobenius and max-abs bounds follow from the elementwise one: ||err||_F <= ||b||_F and
  // max|err| <= max b, each divided by the same reference norm.
  if (ref2 > 0) {
    r.rel_frobenius = std::sqrt(err2 / ref2);
    r.rel_frobenius_bound = std::sqrt(bound2 / ref2);
  }
  if (max_ref > 0) {
    r.max_abs_rel = max_err / max_ref;
    r.max_abs_rel_bound = max_bound / max_ref;
  }
  r.lse_bound = bound.lse_abs;
  return r;
}

}  // namespace mlaverify::cpu::testing

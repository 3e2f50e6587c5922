// Worst-case error bound of the CUDA kernel against the double-precision model, derived from the
// kernel's arithmetic (cuda/verify_kernel.cuh, split_plan.h), and the per-request comparison.
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
#include "model/attention.h"
#include "model/batch.h"

namespace mlaverify::cuda::testing {

inline constexpr double kU = 0x1.0p-24;     // fp32 unit roundoff (round to nearest)
inline constexpr double kUTc = 0x1.0p-23;   // one tensor-core fp32 accumulation step: NVIDIA does
                                            // not promise round-to-nearest, truncation costs 2^-23
inline constexpr double kBf16U = 0x1.0p-8;  // bf16 unit roundoff: 8 significant bits, half an ulp
                                            // of 2^-7 (not 2^-9: docs/spec.md §6.2)
inline constexpr double kFtzMin = 0x1.0p-126;  // smallest weight ex2.approx.ftz keeps (normal)
inline constexpr double kExpU = 0x1.0p-22;  // expf / logf without fast-math: <= 2 ulp (CUDA guide)

// Higham's gamma_n = n u / (1 - n u): n chained roundings of unit u, in any order.
inline double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

// Magnitudes of one request's operands, read back from the batch as the kernel reads them.
struct Magnitudes {
  int64_t prefix_len = 0;
  int32_t draft_nodes = 0;
  double q_norm = 0;          // max over (token, head) of ||[q_lat | q_pe]||_2
  double key_norm = 0;        // max over the request's keys of ||[c | k_pe]||_2
  std::vector<double> v_max;  // [512] max over the request's keys of |c_k|
};

inline Magnitudes magnitudes(const model::VerifyBatch& b, int32_t i) {
  Magnitudes m;
  m.prefix_len = b.prefix_len(i);
  m.draft_nodes = b.tree(i).size();
  m.v_max.assign(kLatentDim, 0.0);
  std::vector<int64_t> slots = b.prefix_slots(i);
  for (int64_t s : b.draft_slots(i)) slots.push_back(s);  // draft rows hold the k_extend values
  for (int64_t s : slots) {
    std::array<float, kRowDim> row = b.pool().read_row(s);
    double n2 = 0;
    for (int k = 0; k < kRowDim; ++k) n2 += double(row[k]) * row[k];
    m.key_norm = std::max(m.key_norm, std::sqrt(n2));
    for (int k = 0; k < kLatentDim; ++k)
      m.v_max[k] = std::max(m.v_max[k], std::fabs(double(row[k])));
  }
  const int32_t H = b.spec().num_heads;
  const int64_t q0 = b.metadata().qo_indptr[i];
  for (int64_t t = q0; t < q0 + m.draft_nodes; ++t)
    for (int32_t h = 0; h < H; ++h) {
      const bf16* q = b.q().data() + (t * H + h) * kRowDim;
      double n2 = 0;
      for (int k = 0; k < kRowDim; ++k) n2 += double(bf16_to_float(q[k])) * bf16_to_float(q[k]);
      m.q_norm = std::max(m.q_norm, std::sqrt(n2));
    }
  return m;
}

struct Bound {
  double o_coeff;  // |o_k - ref_k| <= o_coeff * v_max[k] for every (token, head) of the request
  double lse_abs;  // |lse - ref| for every row that is not fully masked
};

// The derivation, term by term (first-order terms summed, then inflated by (1 + sum) for their
// products). N = P + D keys at most in one partial; T_n = N / 64 + 2 tiles at most.
//  Scores: |s| <= smax = sm_scale ||q|| ||k|| (Cauchy-Schwarz, also bounding sum |q_k k_k|).
//   mma.sync forms bf16 x bf16 products exactly (16-bit significands) and accumulates the 576 of
//   them in fp32, order unknown: |dot error| <= gamma_576(2^-23) sum |q_k k_k|. The kernel keeps
//   scores in log2 units, t = dot * fl(sm_scale * log2 e): the constant's rounding and the multiply
//   add 2u |s|. delta_s = smax (gamma_576(2^-23) + 2u) (natural units). The model reads the same
//   bf16 operands exactly, so nothing else enters the scores.
//  Weights p_j = expf(s_j - m): both s_j and the running max m are computed scores, so the
//   exponent is off by <= 2 delta_s, plus the fp32 subtraction (u |s_j - m| <= 2 u smax), plus
//   exp2f's 2 ulp: eps_p = expm1(2 delta_s + 2 u smax) + 2 kExpU (relative, per weight).
//  Flushed weights: every kernel's 2^x but the 6-stage one's (rings 2-4, ws, wgmma) is
//   ex2.approx.ftz (verify_kernel.cuh softmax_exp2), the same MUFU.EX2 as exp2f for x >= -126 and 0
//   below. A flushed weight is under 2^-126 of the running maximum's weight 1 (later rescales only
//   shrink it; a rescale factor that flushes drops earlier weights that are each under 2^-126 of
//   the new maximum, the same case), so dropping all of them moves the numerator by <= N 2^-126
//   v_max and l by <= N 2^-126 against l >= 1: flush = N 2^-126, absolute, added to both weight
//   sums (o: 2 flush v_max; lse: flush). With N < 2^32 that is < 2^-93, far below every other term,
//   but it is not a relative error per weight and so is not in eps_p.
//   The per-tile rescale exp(m_old - m_new) multiplies l and acc by the same computed number, so
//   its error cancels in o = acc / l (it enters lse only, below).
//  Partial o = sum_j bf16(p_j) v_j / sum_j p_j: numerator weights off by eps_p + 2^-8 (bf16
//   rounding of P for the tensor cores), denominator weights by eps_p; a convex combination with
//   relative weight errors a_j (numerator), b_j (denominator) moves by <= (max|a| + max|b|) v_max
//   / (1 - max|b|). Sums: acc over N keys on tensor cores gamma_N(2^-23), l over N keys in fp32
//   gamma_N(u) (through the 64-key tile sums and the running sum), the division u.
//  Partial lse = ln2 (m2 + log2 l): |m error| <= delta_s; l is off by gamma_N(u) + eps_p-type
//   terms already counted in the weights (relative eps_p + rescale error T_n (kExpU + 2 u smax));
//   log2f adds 2 ulp of |log2 l| <= log2 N; the add and the multiply by fl(ln 2) add 3 u |lse|
//   with |lse| <= smax + log N. delta_l = delta_s + eps_p + gamma_N(u) + T_n (kExpU + 2 u smax) +
//   2 kExpU (log N + 1) + 3 u (smax + log N).
//  Merge: w_s = expf(lse_s - M): exponent off by 2 delta_l, plus expf: eps_w = expm1(2 delta_l) +
//   2 kExpU; o = sum w_s o_s / sum w_s: the convex-combination rule again gives 2 eps_w v_max,
//   plus each o_s's own error (E_part v_max), plus fp32 sums over <= 65 partials gamma_65(u).
//   lse = M + log(sum w): delta_l + eps_w + kExpU log 65 + u |lse|.
//  Output rounding to bf16: 2^-8 |o| <= 2^-8 v_max.
inline Bound derive_bound(const Magnitudes& m, float sm_scale, int32_t num_splits) {
  const double N = static_cast<double>(m.prefix_len + m.draft_nodes);
  const double tiles = N / kKvTile + 2;
  const double smax = static_cast<double>(sm_scale) * m.q_norm * m.key_norm;
  const double delta_s = smax * (gamma_n(kRowDim, kUTc) + 2 * kU);
  const double eps_p = std::expm1(2 * delta_s + 2 * kU * smax) + 2 * kExpU;
  const double a = eps_p + kBf16U + eps_p * kBf16U;
  const double b = eps_p;
  const double flush = N * kFtzMin;
  double e_part = (a + b) / (1 - b) + 2 * flush + gamma_n(N, kUTc) + gamma_n(N, kU) + kU;
  const double log_n = std::log(std::max(N, 1.0));
  const double delta_l = delta_s + eps_p + flush + gamma_n(N, kU) +
                         tiles * (kExpU + 2 * kU * smax) + 2 * kExpU * (log_n + 1) +
                         3 * kU * (smax + log_n);
  const double eps_w = std::expm1(2 * delta_l) + 2 * kExpU;
  const double np = num_partials(num_splits);
  double o_sum = e_part + 2 * eps_w / (1 - eps_w) + gamma_n(np, kU) + kBf16U;
  double lse_sum = delta_l + eps_w + kExpU * std::log(np) + kU * (smax + log_n + 1);
  return {o_sum * (1 + o_sum), lse_sum * (1 + lse_sum)};
}

// Worst measured error of one request, in units of its bound (<= 1 passes), and where.
struct Measured {
  double o_ratio = 0;     // max |o - ref| / (o_coeff v_max[k])
  double lse_ratio = 0;   // max |lse - ref| / lse_abs
  double rel_frob = 0;    // ||o - ref||_F / ||ref||_F, for the report
  std::string worst;      // "(request, token, head, column)" of the worst o element
  bool masked_ok = true;  // fully masked rows: o == 0 and lse == -inf exactly
  bool finite = true;     // no NaN or Inf where the reference is finite
};

// Compares the batch's current outputs (a backend just ran) with `ref`, request i, bound b.
inline Measured compare_request(const model::VerifyBatch& batch, const model::RefResult& ref,
                                int32_t i, const Magnitudes& m, const Bound& bnd) {
  Measured r;
  const int32_t H = batch.spec().num_heads;
  const int64_t q0 = batch.metadata().qo_indptr[i];
  double err2 = 0, ref2 = 0;
  for (int64_t t = q0; t < q0 + m.draft_nodes; ++t)
    for (int32_t h = 0; h < H; ++h) {
      const double rl = ref.lse_at(t, h);
      const double gl = batch.lse_value(t, h);
      if (std::isinf(rl) && rl < 0) {
        for (int k = 0; k < kLatentDim; ++k) r.masked_ok &= batch.o_lat_value(t, h, k) == 0.f;
        r.masked_ok &= std::isinf(gl) && gl < 0;
        continue;
      }
      if (!std::isfinite(gl)) r.finite = false;
      r.lse_ratio = std::max(r.lse_ratio, std::fabs(gl - rl) / bnd.lse_abs);
      for (int k = 0; k < kLatentDim; ++k) {
        const double g = batch.o_lat_value(t, h, k), x = ref.o(t, h, k);
        if (!std::isfinite(g)) r.finite = false;
        const double ratio = std::fabs(g - x) / (bnd.o_coeff * std::max(m.v_max[k], 1e-30));
        if (ratio > r.o_ratio) {
          r.o_ratio = ratio;
          std::ostringstream w;
          w << "(request " << i << ", token " << t << ", head " << h << ", column " << k << ": got "
            << g << ", ref " << x << ")";
          r.worst = w.str();
        }
        err2 += (g - x) * (g - x);
        ref2 += x * x;
      }
    }
  r.rel_frob = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return r;
}

}  // namespace mlaverify::cuda::testing

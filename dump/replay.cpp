// The element-wise bound for a foreign bf16-in, fp32-accumulate, bf16-out verify kernel, and the
// comparison of its outputs with the model, request by request.
#include "dump/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/attention.h"
#include "model/bitrows.h"
#include "model/mask.h"
#include "model/storage.h"

namespace mlaverify::dump {
namespace {

constexpr double kU = 0x1.0p-24;   // fp32 unit roundoff (round to nearest)
constexpr double kUb = 0x1.0p-8;   // bf16: 8 significant bits, rounding moves x by <= 2^-8 |x|
constexpr double kInf = std::numeric_limits<double>::infinity();

double gamma(double n, double unit) { return n * unit / (1.0 - n * unit); }

// Key n's V row (512) under a reading that takes V apart from the scores' latent c
// (value.same_as_c() is false): the same slot or k_extend row, at the reading's offset and
// stride. The key itself is model::read_key's.
void read_value(const VerifyParams& p, const RequestExtent& e, int64_t n,
                const ValueReading& value, double* v) {
  int64_t at;
  const void* base;
  if (n < e.prefix_len || p.draft_source == DraftKvSource::CacheSlots) {
    const int64_t slot = p.kv_indices[e.kv_begin + n];
    const int64_t stride = value.v_stride > 0 ? value.v_stride : p.kv_layout.latent_stride;
    base = p.kv_pool;
    at = p.kv_layout.latent_offset + slot * stride + value.v_offset;
  } else {
    const int64_t stride = value.v_stride > 0 ? value.v_stride : p.k_extend_stride;
    base = p.k_extend;
    at = (e.q_begin + (n - e.prefix_len)) * stride + value.v_offset;
  }
  model::load_row(p.kv_dtype, base, at, kLatentDim, v);
}

}  // namespace

// The derivation, for one row (a draft token and head) with n visible-or-not keys, exact scores
// s_j, exact softmax weights w_j and |V| column sums A_k = sum_j w_j |v_jk| (u = 2^-24; u_a the
// accumulation unit, 2^-23 by default since tensor cores truncate; u_b = 2^-8):
//  1. Scores. The kernel forms q . key over 576 bf16 products (exact in fp32) summed in any
//     order and grouping: |error| <= gamma_576(u_a) sum_k |q_k key_k| (Higham, Thm 3.1), then
//     rounds sm_scale * dot (u |s|) and may fold log2(e) into the scale for exp2 (one more u |s|).
//     So delta_j = sm_scale gamma_576(u_a) sum_k |q_k key_k| + 2 u |s_j|, computed per key from the
//     very operands (not through Cauchy-Schwarz). Forming s_j - m rounds once more: u |s_j - m|.
//     Delta = max over the row's visible keys of delta_j + u |s_j - m|.
//  2. Weights. p_j = exp(s_j - m) is then off by eta = expm1(Delta)(1 + e_x) + e_x relative
//     (e_x: the exp's own error); a common shift of every score cancels in the normalization,
//     and the normalized weights move by at most 2 eta / (1 - eta) relative, so o_k moves by at
//     most that times sum_j w_j |v_jk| = A_k.
//  3. Sums. l = sum p_j and acc_k = sum bf16(p_j) v_jk take at most N = 3n + 2 roundings each
//     whatever the tiling (a product, a rescale multiply and an add per key when every tile is a
//     single key, plus the final ones): gamma_N(u_a) relative to sum p_j |v_jk|. Rounding p to
//     bf16 before P.V adds u_b to the numerator only. o = acc / l: (A + B) / (1 - B) with
//     A = u_b + gamma_N and B = gamma_N, plus u for the division.
//  4. Partial lse = m + ln l: Delta + eta + gamma_N + 2 u (max|s| + ln n + 1).
//  5. A split merge over S <= max_partials partials: weights exp(lse_s - M) move by
//     expm1(2 dlse) relative, the sums add gamma_(S + 2)(u); o stays a convex combination of the
//     partials, whose |.| is again bounded by A_k. (A kernel that does not split gets this term
//     anyway: the bound does not know.)
//  6. The output is rounded to bf16: u_b |o| <= u_b |ref| + u_b * (the rest), hence the final
//     (1 + u_b) factor and the u_b |ref| term the comparison adds per element.
// First-order terms are summed and the sum multiplied by (1 + sum) to cover their products.
// Terms a foreign kernel could change, and what then happens: summation order and tiling (any:
// covered); split count (covered up to max_partials); P kept in fp16 or fp32 rather than bf16
// (covered, smaller); fp32 output (covered, smaller); a kernel that pre-scales q by sm_scale
// and rounds it to bf16, or accumulates in bf16, is less accurate than this contract and fails.
BoundTerms bound_terms(const VerifyParams& p, const KernelAssumptions& assume,
                       const ValueReading& value, std::vector<double>* o_value) {
  const int64_t T = p.qo_indptr[p.batch_size];
  const int32_t H = p.num_heads;
  BoundTerms b;
  b.o_coeff.assign(static_cast<size_t>(T * H), 0.0);
  b.lse_abs.assign(static_cast<size_t>(T * H), 0.0);
  b.a_abs.assign(static_cast<size_t>(T * H * kLatentDim), 0.0);
  if (o_value != nullptr) o_value->assign(static_cast<size_t>(T * H * kLatentDim), 0.0);
  const double sm = static_cast<double>(p.sm_scale);
  const double ua = assume.accumulate_unit;
  const double S = static_cast<double>(std::max(assume.max_partials, 1));

  for (int32_t i = 0; i < p.batch_size; ++i) {
    const RequestExtent e = request_extent(p, i);
    const int64_t n = e.prefix_len + e.draft_nodes;
    const model::BitRows block = model::draft_block(p, i);
    // Keys once per request: [n, 576] and V [n, 512].
    std::vector<double> keys(static_cast<size_t>(n * kRowDim)), vals(static_cast<size_t>(n) * kLatentDim);
    for (int64_t j = 0; j < n; ++j) {
      double* key = keys.data() + j * kRowDim;
      double* v = vals.data() + j * kLatentDim;
      model::read_key(p, i, j, key);
      if (value.same_as_c()) {
        std::copy(key, key + kLatentDim, v);
      } else {
        read_value(p, e, j, value, v);
      }
    }
    const double ln_n = std::log(static_cast<double>(std::max<int64_t>(n, 1)));
    const double gN = gamma(3.0 * static_cast<double>(n) + 2.0, ua);
    double q[kRowDim];
    std::vector<double> s(static_cast<size_t>(n)), absdot(static_cast<size_t>(n));
    for (int32_t t = 0; t < e.draft_nodes; ++t) {
      for (int32_t h = 0; h < H; ++h) {
        const int64_t token = e.q_begin + t;
        const size_t row = static_cast<size_t>(token * H + h);
        model::read_query(p, token, h, q);
        double m = -kInf;
        for (int64_t j = 0; j < n; ++j) {
          const bool visible = j < e.prefix_len || block.test(t, static_cast<int32_t>(j - e.prefix_len));
          if (!visible) {
            s[j] = -kInf;
            continue;
          }
          const double* k = keys.data() + j * kRowDim;
          double dot = 0, ad = 0;
          for (int c = 0; c < kRowDim; ++c) {
            dot += q[c] * k[c];
            ad += std::fabs(q[c] * k[c]);
          }
          s[j] = sm * dot;
          absdot[j] = ad;
          m = std::max(m, s[j]);
        }
        if (m == -kInf) {  // fully masked: the exact answer is o = 0, lse = -inf, no error
          continue;
        }
        double l = 0, delta = 0, smax = 0;
        for (int64_t j = 0; j < n; ++j) {
          if (s[j] == -kInf) continue;
          l += std::exp(s[j] - m);
          delta = std::max(delta, sm * gamma(kRowDim, ua) * absdot[j] + 2 * kU * std::fabs(s[j]) +
                                      kU * std::fabs(s[j] - m));
          smax = std::max(smax, std::fabs(s[j]));
        }
        double* a = b.a_abs.data() + row * kLatentDim;
        double* ov = o_value != nullptr ? o_value->data() + row * kLatentDim : nullptr;
        for (int64_t j = 0; j < n; ++j) {
          if (s[j] == -kInf) continue;
          const double w = std::exp(s[j] - m) / l;
          const double* v = vals.data() + j * kLatentDim;
          for (int c = 0; c < kLatentDim; ++c) a[c] += w * std::fabs(v[c]);
          if (ov != nullptr) {
            for (int c = 0; c < kLatentDim; ++c) ov[c] += w * v[c];
          }
        }
        const double eta = std::expm1(delta) * (1 + assume.exp_rel) + assume.exp_rel;
        if (eta >= 1) {  // no finite first-order bound follows
          b.o_coeff[row] = kInf;
          b.lse_abs[row] = kInf;
          continue;
        }
        const double weights = 2 * eta / (1 - eta);
        const double partial_o = weights + (kUb + 2 * gN) / (1 - gN) + kU;
        const double dlse = delta + eta + gN + 2 * kU * (smax + ln_n + 1);
        const double merge_o = std::expm1(2 * dlse) + gamma(S + 2, kU);
        const double first = (partial_o + merge_o) * (1 + kUb);
        b.o_coeff[row] = first * (1 + first);
        const double lse_max = smax + ln_n;
        const double lse_first = dlse + std::expm1(2 * dlse) + gamma(S + 2, kU) +
                                 2 * kU * (lse_max + std::log(S) + 1);
        b.lse_abs[row] = lse_first * (1 + lse_first);
        b.worst_o_coeff = std::max(b.worst_o_coeff, b.o_coeff[row]);
      }
    }
  }
  return b;
}

bool Comparison::pass() const {
  for (const RequestResult& r : requests) {
    if (!r.padded && !r.pass()) return false;
  }
  return true;
}

double Comparison::worst_ratio() const {
  double w = 0;
  for (const RequestResult& r : requests) {
    if (!r.padded) w = std::max(w, r.worst_ratio);
  }
  return w;
}

const RequestResult* Comparison::worst() const {
  const RequestResult* w = nullptr;
  for (const RequestResult& r : requests) {
    if (!r.padded && (w == nullptr || r.worst_ratio > w->worst_ratio)) w = &r;
  }
  return w;
}

double Comparison::rel_frobenius() const { return rel_frob_all; }

Comparison compare(const VerifyParams& p, int32_t real_bs, const std::vector<float>& o,
                   const std::vector<float>& lse, const std::vector<double>& ref_o,
                   const std::vector<double>& ref_lse, const BoundTerms& bound) {
  const int32_t H = p.num_heads;
  const int64_t T = p.qo_indptr[p.batch_size];
  Comparison c;
  c.lse_compared = !lse.empty();
  c.ratio.assign(static_cast<size_t>(T * H * kLatentDim), 0.f);
  double err2_all = 0, ref2_all = 0;
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const RequestExtent e = request_extent(p, i);
    RequestResult r;
    r.request = i;
    r.padded = i >= real_bs;
    r.draft_nodes = e.draft_nodes;
    r.prefix_len = e.prefix_len;
    double err2 = 0, ref2 = 0;
    r.worst_ratio = -1;
    auto consider = [&](double ratio, int64_t token, int32_t head, int32_t col, double got,
                        double want, double bnd) {
      if (ratio > r.worst_ratio) {
        r.worst_ratio = ratio;
        r.worst_token = token;
        r.worst_head = head;
        r.worst_column = col;
        r.worst_got = got;
        r.worst_ref = want;
        r.worst_bound = bnd;
      }
    };
    for (int64_t token = e.q_begin; token < e.q_begin + e.draft_nodes; ++token) {
      for (int32_t h = 0; h < H; ++h) {
        const size_t row = static_cast<size_t>(token * H + h);
        const bool masked = ref_lse[row] == -kInf;
        for (int k = 0; k < kLatentDim; ++k) {
          const size_t at = row * kLatentDim + k;
          const double got = o[at], want = ref_o[at];
          double bnd = masked ? 0.0 : bound.o_coeff[row] * bound.a_abs[at] + kUb * std::fabs(want);
          double ratio;
          if (!std::isfinite(got)) {
            ++r.nonfinite;
            ++r.over;
            ratio = kInf;
          } else {
            const double err = std::fabs(got - want);
            ratio = err == 0 ? 0.0 : (bnd > 0 ? err / bnd : kInf);
            if (ratio > 1) ++r.over;
            err2 += err * err;
            ref2 += want * want;
            r.max_abs = std::max(r.max_abs, err);
            r.max_ref = std::max(r.max_ref, std::fabs(want));
          }
          c.ratio[at] = static_cast<float>(std::min(ratio, 1e30));
          consider(ratio, token, h, k, got, want, bnd);
        }
        if (c.lse_compared) {
          const double got = lse[row], want = ref_lse[row];
          double ratio;
          if (masked) {
            ratio = got == -kInf ? 0.0 : kInf;
          } else if (!std::isfinite(got)) {
            ++r.nonfinite;
            ratio = kInf;
          } else {
            const double err = std::fabs(got - want);
            r.lse_err = std::max(r.lse_err, err);
            ratio = err == 0 ? 0.0 : (bound.lse_abs[row] > 0 ? err / bound.lse_abs[row] : kInf);
          }
          if (ratio > 1) ++r.over;
          consider(ratio, token, h, -1, got, want, masked ? 0.0 : bound.lse_abs[row]);
        }
      }
    }
    r.rel_frobenius = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? kInf : 0.0);
    if (!r.padded) {
      err2_all += err2;
      ref2_all += ref2;
    }
    c.requests.push_back(r);
  }
  c.rel_frob_all = ref2_all > 0 ? std::sqrt(err2_all / ref2_all) : (err2_all > 0 ? kInf : 0.0);
  return c;
}

}  // namespace mlaverify::dump

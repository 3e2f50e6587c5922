// Comparators and the tolerance derivation for backends that follow split_plan.h's algorithm
// (bf16 operands, fp32 accumulation and online softmax, bf16 P, exact merge, bf16 output).
#include "props/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "mlaverify/split_plan.h"

namespace mlaverify::props {

double gamma_f32(double n) { return n * kF32Unit / (1.0 - n * kF32Unit); }

std::string WorstIndex::to_string() const {
  std::ostringstream os;
  os << "(request " << request << ", query " << query << " = token " << token << ", head " << head;
  if (column >= 0) {
    os << ", column " << column << ")";
  } else {
    os << ", lse)";
  }
  return os.str();
}

std::string Comparison::to_string() const {
  std::ostringstream os;
  os.precision(4);
  os << (pass ? "pass" : "FAIL") << ": rel_frobenius " << rel_frobenius << ", max_abs " << max_abs
     << " (" << max_abs_rel << " of max|ref|), cosine " << cosine << ", max lse err "
     << max_lse_err;
  if (nonfinite) os << ", " << nonfinite << " non-finite";
  if (violations) os << ", " << violations << " beyond bound";
  os << "; worst " << worst.to_string() << " err " << worst_err << " vs bound " << worst_bound;
  if (worst_lse.request >= 0) os << "; worst lse " << worst_lse.to_string();
  return os.str();
}

// Derivation (one request; n = P_i + D_i keys, at most n in any partial; S_p = num_splits + 1
// partials). Operands are the stored bf16 values the model also reads, so every error below is
// the backend's own fp32 arithmetic plus its two bf16 roundings (P before P@V, and o at the end).
//
//  1. Scores. s = sm_scale * (q . key) over 576 products, summed in fp32 in any order:
//     |ds| <= gamma_576 * sm_scale * sum_k |q_k key_k| + u32 |s|  (Higham 3.1; one more rounding
//     for the multiply by sm_scale). By Cauchy-Schwarz sum_k |q_k key_k| <= |q|_2 |key|_2, so with
//     Smax = sm_scale * max|q|_2 * max|key|_2 (over the request's queries, heads and keys):
//     eps_s = (gamma_576 + u32) * Smax.
//  2. Weights p_j = exp(s_j - m). A common shift of every s_j cancels in the normalisation, so
//     only differences matter: each weight's relative error from scores is <= e^{eps_s} - 1 and the
//     normalised weights move by <= e^{2 eps_s} - 1. exp itself: relative 2^-21 (covers glibc expf
//     and the GPU's ex2.approx, ~2^-22.5, with margin). Rounding x = s_j - m in fp32 perturbs the
//     exponent by u32 |x|; weighted by the softmax, E_p[|x|] = H(p) - ln l <= ln n, so the average
//     relative weight error from it is <= u32 (ln n + 1).
//  3. Sums. l = sum p_j and acc = sum bf16(p_j) v_j are recursive fp32 sums over n keys plus one
//     rescale multiply per 64-key tile: N = n + 2 ceil(n / 64) + 2 roundings, relative gamma_N of
//     sum p_j |v_j|. bf16(p_j) adds u_bf16 relative on the numerator only.
//     With A = numerator relative error and B = denominator's, o = acc / l is within
//     (A + B) / (1 - B) * vmax of the exact convex combination (|v| <= vmax, the request's largest
//     |c_k|), plus u32 for the division.
//  4. Partial lse = m + ln l: error <= eps_s + B + 2 u32 (Smax + ln n + 1) (the log's argument is
//     off by B relative, ln(1+B) <= B; two fp32 roundings of magnitudes <= Smax + ln n).
//  5. Merge over S_p partials: weights exp(lse_s - M) move by <= e^{2 dlse} - 1 relative; the two
//     fp32 sums add gamma_{S_p + 2}; o stays a convex combination, so the error scales with vmax.
//     The merged lse: dlse + gamma_{S_p + 2} + 2 u32 (|lse| + ln S_p + 1).
//  6. The final o is rounded to bf16: + u_bf16 |o| per element (compare_to_model adds it per
//     element, against |ref|, and scales the rest by (1 + u_bf16)).
Tolerance derive_tolerance(model::VerifyBatch& batch, int32_t i) {
  VerifyParams p = batch.params();
  RequestView rv = request_view(batch, i);
  const int64_t n = rv.prefix_len + rv.draft_nodes;
  double row[kRowDim];
  double qmax = 0, kmax = 0, vmax = 0;
  for (int64_t t = 0; t < rv.draft_nodes; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      read_query(p, rv.q_begin + t, h, row);
      double s = 0;
      for (double x : row) s += x * x;
      qmax = std::max(qmax, std::sqrt(s));
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    read_key(p, i, j, row);
    double s = 0;
    for (int k = 0; k < kRowDim; ++k) {
      s += row[k] * row[k];
      if (k < kLatentDim) vmax = std::max(vmax, std::fabs(row[k]));
    }
    kmax = std::max(kmax, std::sqrt(s));
  }
  const double u = kF32Unit;
  const double smax = static_cast<double>(p.sm_scale) * qmax * kmax;
  const double eps_s = (gamma_f32(kRowDim) + u) * smax;
  const double ln_n = std::log(static_cast<double>(std::max<int64_t>(n, 1)));
  const double exp_rel = 0x1.0p-21 + u * (ln_n + 1.0);
  const double big_n = static_cast<double>(n + 2 * ceil_div(n, kKvTile) + 2);
  const double score_rel = std::expm1(2.0 * eps_s);
  const double a = score_rel + exp_rel + gamma_f32(big_n) + kBf16Unit;
  const double b = score_rel + exp_rel + gamma_f32(big_n);
  const double partial_o = (a + b) / (1.0 - b) + u;
  const double dlse = eps_s + b + 2.0 * u * (smax + ln_n + 1.0);
  const double sp = static_cast<double>(num_partials(p.num_splits));
  const double merge_o = std::expm1(2.0 * dlse) + gamma_f32(sp + 2.0);
  Tolerance tol;
  tol.o_abs = (partial_o + merge_o) * vmax * (1.0 + kBf16Unit);
  // |lse| <= smax + ln n: the scaled scores are bounded by smax and there are n of them.
  tol.lse_abs = dlse + gamma_f32(sp + 2.0) + 2.0 * u * (smax + ln_n + std::log(sp) + 1.0);
  std::ostringstream os;
  os.precision(3);
  os << "request " << i << ": n=" << n << " Smax=" << smax << " eps_s=" << eps_s << " vmax=" << vmax
     << " -> o_abs " << tol.o_abs << " + 2^-8|ref|, lse " << tol.lse_abs;
  tol.derivation = os.str();
  return tol;
}

namespace {

// Accumulates the Frobenius, cosine and worst-element statistics of one comparison.
struct Accumulator {
  double diff2 = 0, ref2 = 0, out2 = 0, dot = 0, ref_max = 0;
  double worst_ratio = -1;
  double worst_lse_ratio = -1;
  Comparison c;

  void element(double o, double r, double bound, const WorstIndex& at) {
    if (!std::isfinite(o)) {
      ++c.nonfinite;
      ++c.violations;
      if (worst_ratio < std::numeric_limits<double>::infinity()) {
        worst_ratio = std::numeric_limits<double>::infinity();
        c.worst = at;
        c.worst_err = std::numeric_limits<double>::infinity();
        c.worst_bound = bound;
      }
      return;
    }
    double err = std::fabs(o - r);
    diff2 += err * err;
    ref2 += r * r;
    out2 += o * o;
    dot += o * r;
    ref_max = std::max(ref_max, std::fabs(r));
    c.max_abs = std::max(c.max_abs, err);
    if (err > bound) ++c.violations;
    double ratio = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::max() : 0.0);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.worst = at;
      c.worst_err = err;
      c.worst_bound = bound;
    }
  }

  void lse(double o, double r, double bound, const WorstIndex& at) {
    bool both_neg_inf = std::isinf(o) && std::isinf(r) && o < 0 && r < 0;
    if (both_neg_inf) return;
    if (!std::isfinite(o) || !std::isfinite(r)) {
      ++c.nonfinite;
      ++c.violations;
      c.worst_lse = at;
      worst_lse_ratio = std::numeric_limits<double>::infinity();
      c.max_lse_err = std::numeric_limits<double>::infinity();
      return;
    }
    double err = std::fabs(o - r);
    c.max_lse_err = std::max(c.max_lse_err, err);
    if (err > bound) ++c.violations;
    double ratio = bound > 0 ? err / bound : (err > 0 ? 1e300 : 0.0);
    if (ratio > worst_lse_ratio) {
      worst_lse_ratio = ratio;
      c.worst_lse = at;
    }
  }

  Comparison finish() {
    c.rel_frobenius = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    c.max_abs_rel = ref_max > 0 ? c.max_abs / ref_max : c.max_abs;
    c.cosine = (ref2 > 0 && out2 > 0) ? dot / std::sqrt(ref2 * out2) : (diff2 == 0 ? 1.0 : 0.0);
    c.pass = c.violations == 0;
    return c;
  }
};

}  // namespace

Comparison compare_to_model(model::VerifyBatch& batch, const RunOutput& out,
                            const model::RefResult& ref) {
  Accumulator acc;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    Tolerance tol = derive_tolerance(batch, i);
    RequestView rv = request_view(batch, i);
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < out.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          double r = ref.o(t, h, k);
          acc.element(out.o_at(t, h, k), r, tol.o_abs + kBf16Unit * std::fabs(r),
                      WorstIndex{i, q, t, h, k});
        }
        if (out.has_lse) {
          acc.lse(out.lse_at(t, h), ref.lse_at(t, h), tol.lse_abs, WorstIndex{i, q, t, h, -1});
        }
      }
    }
  }
  return acc.finish();
}

Comparison compare_runs_within(model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                               const std::vector<int32_t>& requests) {
  Accumulator acc;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    if (!requests.empty() && std::find(requests.begin(), requests.end(), i) == requests.end()) {
      continue;
    }
    Tolerance tol = derive_tolerance(batch, i);
    RequestView rv = request_view(batch, i);
    const double o_tol = 2.0 * tol.o_abs * (1.0 + 2.0 * kBf16Unit);
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < a.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          double x = a.o_at(t, h, k), y = b.o_at(t, h, k);
          double bound = o_tol + 2.0 * kBf16Unit * std::max(std::fabs(x), std::fabs(y));
          // b plays the reference: its non-finite values are as much a failure as a's.
          if (!std::isfinite(y)) {
            acc.element(y, x, bound, WorstIndex{i, q, t, h, k});
          } else {
            acc.element(x, y, bound, WorstIndex{i, q, t, h, k});
          }
        }
        if (a.has_lse && b.has_lse) {
          acc.lse(a.lse_at(t, h), b.lse_at(t, h), 2.0 * tol.lse_abs, WorstIndex{i, q, t, h, -1});
        }
      }
    }
  }
  return acc.finish();
}

Comparison compare_bits(const model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                        const std::vector<int32_t>& requests) {
  std::vector<int32_t> which = requests;
  if (which.empty()) {
    for (int32_t i = 0; i < batch.real_batch_size(); ++i) which.push_back(i);
  }
  std::vector<std::pair<int32_t, RequestView>> views;
  for (int32_t i : which) views.emplace_back(i, request_view(batch, i));
  return compare_bits(views, a, b);
}

Comparison compare_bits(const std::vector<std::pair<int32_t, RequestView>>& views,
                        const RunOutput& a, const RunOutput& b) {
  Accumulator acc;
  auto same_bits = [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  for (const auto& [i, rv] : views) {
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < a.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          float x = a.o_at(t, h, k), y = b.o_at(t, h, k);
          if (same_bits(x, y)) {
            if (std::isfinite(x)) acc.element(x, y, 0.0, WorstIndex{i, q, t, h, k});
            continue;
          }
          ++acc.c.violations;
          double err = (std::isfinite(x) && std::isfinite(y))
                           ? std::fabs(static_cast<double>(x) - y)
                           : std::numeric_limits<double>::infinity();
          if (err > acc.worst_ratio) {
            acc.worst_ratio = err;
            acc.c.worst = WorstIndex{i, q, t, h, k};
            acc.c.worst_err = err;
            acc.c.worst_bound = 0;
          }
          if (std::isfinite(err)) {
            acc.diff2 += err * err;
            acc.c.max_abs = std::max(acc.c.max_abs, err);
          } else {
            ++acc.c.nonfinite;
          }
        }
        float x = a.lse_at(t, h), y = b.lse_at(t, h);
        if (a.has_lse && b.has_lse && !same_bits(x, y)) {
          ++acc.c.violations;
          acc.c.worst_lse = WorstIndex{i, q, t, h, -1};
          double err = std::fabs(static_cast<double>(x) - y);
          acc.c.max_lse_err = std::isnan(err) ? std::numeric_limits<double>::infinity()
                                              : std::max(acc.c.max_lse_err, err);
        }
      }
    }
  }
  Comparison c = acc.finish();
  c.pass = c.violations == 0;
  return c;
}

}  // namespace mlaverify::props

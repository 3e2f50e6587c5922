// Comparators and the tolerance derivation for backends that follow split_plan.h's algorithm
// (bf16 operands, fp32 accumulation and online softmax, bf16 P, exact merge, bf16 output).
#include "props/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include <Eigen/Dense>

#include "mlaverify/split_plan.h"
#include "model/bitrows.h"
#include "model/mask.h"

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
  if (improbable) {
    os << ", " << improbable << " beyond the probable bound (a correct kernel: p < " << kFalseAlarm
       << " per campaign)";
  }
  if (worst_probable_ratio > 0) os << "; err/probable bound " << worst_probable_ratio;
  os << "; worst " << worst.to_string() << " err " << worst_err << " vs bound " << worst_bound;
  if (worst_lse.request >= 0) os << "; worst lse " << worst_lse.to_string();
  return os.str();
}

int32_t declared_partials(const Capabilities& declared, const VerifyParams& p) {
  if (declared.honours_num_splits) return num_partials(p.num_splits);
  return declared.numerics.max_partials > 0 ? declared.numerics.max_partials : 64;
}

double output_unit(DType o_dtype) { return o_dtype == DType::F32 ? kF32Unit : kBf16Unit; }

namespace {

// Higham's gamma_n for a unit other than fp32's.
double gamma_u(double n, double unit) { return n * unit / (1.0 - n * unit); }

// Whether x survives a round trip through bf16: an operand the kernel rounds to bf16 unchanged.
bool bf16_exact(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(f) == x && round_bf16(f) == f;
}

}  // namespace

// Derivation (one request; n = P_i + D_i keys, at most n in any partial; S_p partials, from the
// backend's declaration: num_splits + 1 if it honours num_splits, else Numerics::max_partials).
// Units, all from Numerics: u_a the accumulation of the dot, the softmax sums and P.V (2^-24
// for the CPU backend, 2^-23 by default for tensor cores); u_p the rounding of P before P.V
// (bf16 2^-8, or fp32); u_x one exp; u_op the rounding of an fp32-stored operand that is not a
// bf16 value (0: the products use it as is, and round); u = 2^-24 for the plain fp32 operations
// (the scale multiply, the subtraction s - m, the merge, the division); u_o the output rounding
// (o_dtype). Operands stored as bf16, or fp32 holding bf16 values, are read exactly by any kernel.
//
//  1. Scores. s = sm_scale * (q . key) over 576 products, summed in any order:
//     |ds| <= gamma_576(u_a) * sm_scale * sum_k |q_k key_k| + u |s|  (Higham 3.1; one more rounding
//     for the multiply by sm_scale). By Cauchy-Schwarz sum_k |q_k key_k| <= |q|_2 |key|_2, so with
//     Smax = sm_scale * max|q|_2 * max|key|_2 (over the request's queries, heads and keys):
//     eps_s = (gamma_576(u_a) + u) * Smax. Operands not bf16-exact: + (2 u_op + u_op^2) Smax when
//     the kernel rounds them, + gamma_1(u_a) Smax for the product roundings when it does not.
//  2. Weights p_j = exp(s_j - m). A common shift of every s_j cancels in the normalisation, so
//     only differences matter: each weight's relative error from scores is <= e^{eps_s} - 1 and the
//     normalised weights move by <= e^{2 eps_s} - 1. exp itself: relative u_x per weight, and
//     once more per rescale exp(m - m') a key's running sums go through: u_x (1 + tiles), with
//     tiles = ceil(n / tile) + S_p (each partial, and the draft block apart from the prefix, may
//     start a tile of its own). Rounding x = s_j - m in fp32 perturbs the exponent by
//     u |x|; weighted by the softmax, E_p[|x|] = H(p) - ln l <= ln n, so the average relative
//     weight error from it is <= u (ln n + 1).
//  3. Sums. l = sum p_j and acc = sum P_j v_j are sums over n keys plus one rescale multiply and
//     add per tile: N = n + 2 tiles + 2 roundings, relative gamma_N(u_a) of
//     sum p_j |v_j|. P rounded adds u_p relative on the numerator only (and, when P is fp32, the
//     products P_j v_j round too: + u_a); a V that is not bf16-exact adds u_op.
//     With A = numerator relative error and B = denominator's, o = acc / l is within
//     (A + B) / (1 - B) * vmax of the exact convex combination (|v| <= vmax, the request's largest
//     |c_k|), plus u for the division.
//  4. Partial lse = m + ln l: error <= eps_s + B + 2 u (Smax + ln n + 1) (the log's argument is
//     off by B relative, ln(1+B) <= B; two fp32 roundings of magnitudes <= Smax + ln n).
//  5. Merge over S_p partials: weights exp(lse_s - M) move by <= e^{2 dlse} - 1 relative; the two
//     fp32 sums add gamma_{S_p + 2}(u); o stays a convex combination, so the error scales with
//     vmax. The merged lse: dlse + gamma_{S_p + 2}(u) + 2 u (|lse| + ln S_p + 1).
//  6. The final o is rounded to o_dtype: + u_o |o| per element (compare_to_model adds it per
//     element, against |ref|, and scales the rest by (1 + u_o)).
// For the CPU backend's declaration (u_a = 2^-24, bf16 P, num_splits + 1 partials) every term is
// the one this file derived before declarations existed, plus two corrections of terms it had
// left out: the rescale exps of item 2, and a tile per partial in the counts of items 2-3
// (each adds well under 10^-5 vmax).
Tolerance derive_tolerance(model::VerifyBatch& batch, int32_t i, const Capabilities& declared) {
  return derive_tolerance(batch.params(), i, request_view(batch, i), declared);
}

Tolerance derive_tolerance(const VerifyParams& p, int32_t i, const RequestView& rv,
                           const Capabilities& declared) {
  const Numerics& nm = declared.numerics;
  const int64_t n = rv.prefix_len + rv.draft_nodes;
  double row[kRowDim];
  double qmax = 0, kmax = 0, vmax = 0;
  bool exact_qk = true, exact_v = true;
  for (int64_t t = 0; t < rv.draft_nodes; ++t) {
    for (int32_t h = 0; h < p.num_heads; ++h) {
      read_query(p, rv.q_begin + t, h, row);
      double s = 0;
      for (double x : row) {
        s += x * x;
        exact_qk = exact_qk && bf16_exact(x);
      }
      qmax = std::max(qmax, std::sqrt(s));
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    read_key(p, i, j, row);
    double s = 0;
    for (int k = 0; k < kRowDim; ++k) {
      s += row[k] * row[k];
      exact_qk = exact_qk && bf16_exact(row[k]);
      if (k < kLatentDim) {
        vmax = std::max(vmax, std::fabs(row[k]));
        exact_v = exact_v && bf16_exact(row[k]);
      }
    }
    kmax = std::max(kmax, std::sqrt(s));
  }
  const double u = kF32Unit;
  const double ua = nm.accumulate_unit;
  const double tile = static_cast<double>(std::max(nm.tile_keys, 1));
  const double smax = static_cast<double>(p.sm_scale) * qmax * kmax;
  double eps_s = (gamma_u(kRowDim, ua) + u) * smax;
  if (!exact_qk) {
    eps_s += (nm.operand_unit > 0 ? nm.operand_unit * (2.0 + nm.operand_unit) : gamma_u(1, ua)) *
             smax;
  }
  const double ln_n = std::log(static_cast<double>(std::max<int64_t>(n, 1)));
  const double sp = static_cast<double>(declared_partials(declared, p));
  const double tiles = std::ceil(static_cast<double>(n) / tile) + sp;
  const double exp_rel = nm.exp_unit * (1.0 + tiles) + u * (ln_n + 1.0);
  const double big_n = static_cast<double>(n) + 2.0 * tiles + 2.0;
  const double score_rel = std::expm1(2.0 * eps_s);
  // bf16 P times bf16 V is exact in fp32 (8 + 8 significant bits); a wider P rounds the product.
  const double p_round = nm.p_unit + (nm.p_unit < kBf16Unit ? ua : 0.0);
  const double v_round = exact_v ? 0.0 : nm.operand_unit;
  const double a = score_rel + exp_rel + gamma_u(big_n, ua) + p_round + v_round;
  const double b = score_rel + exp_rel + gamma_u(big_n, ua);
  const double partial_o = (a + b) / (1.0 - b) + u;
  const double dlse = eps_s + b + 2.0 * u * (smax + ln_n + 1.0);
  const double merge_o = std::expm1(2.0 * dlse) + gamma_f32(sp + 2.0);
  Tolerance tol;
  tol.o_unit = output_unit(p.o_dtype);
  tol.o_abs = (partial_o + merge_o) * vmax * (1.0 + tol.o_unit);
  // |lse| <= smax + ln n: the scaled scores are bounded by smax and there are n of them.
  tol.lse_abs = dlse + gamma_f32(sp + 2.0) + 2.0 * u * (smax + ln_n + std::log(sp) + 1.0);
  std::ostringstream os;
  os.precision(3);
  os << "request " << i << ": n=" << n << " Smax=" << smax << " eps_s=" << eps_s << " vmax=" << vmax
     << " partials=" << sp << " u_a=" << ua << " -> o_abs " << tol.o_abs << " + " << tol.o_unit
     << "|ref|, lse " << tol.lse_abs;
  tol.derivation = os.str();
  return tol;
}

double probable_lambda() {
  return std::sqrt(2.0 * std::log(2.0 * kCampaignComparisons / kFalseAlarm));
}

// The probable bound. One row (draft query t, head h) of request i, with its visible keys j,
// exact scores s_j, m = max s_j, exact weights w_j and exact output r = sum_j w_j v_j. Write the
// kernel's result exactly (no first-order step) as
//
//   o_k - r_k = [ sum_j w_j e_j (v_jk - r_k) + sum_j w_j (1 + e_j) pi_j v_jk + alpha_k / l
//                 - r_k beta / l ] / (1 + ebar + beta / l)                                   (*)
//
// where e_j is the relative error of key j's weight as the kernel forms it (scores, exp, the
// rescales, the merge; a common factor cancels between numerator and denominator), pi_j the
// rounding of P_j (|pi_j| <= u_p), alpha_k and beta the rounding errors of the sums acc_k and l
// (any order), ebar = sum_j w_j e_j. (*) follows from sum_j w_j (v_jk - r_k) = 0.
//
// The rounding model: each round-to-nearest rounding is delta with |delta| <= its unit and mean
// zero given everything computed before it. Then every rounding's contribution to (*) is a
// martingale difference bounded by a known c, and Azuma-Hoeffding gives, for the sum X of such
// contributions, P(|X| >= lambda sqrt(sum c^2)) <= 2 exp(-lambda^2 / 2); also |X| <= sum c always.
// With lambda = probable_lambda() and a union bound over at most kCampaignComparisons
// comparisons (each element and lse of each case of a campaign), a correct kernel fails the
// probable bound anywhere in a campaign with probability <= kFalseAlarm. Charged at their worst
// instead (no mean assumed): exp and log (u_x each: approximations need not be unbiased), the
// directed part of a truncating accumulator (u_a - 2^-24 per add, when u_a > 2^-24), the merge's
// few roundings, the operand conversion, and every second-order term.
//
// The terms, per key j (a_j = sm_scale |q|_2 |key_j|_2 >= sm_scale sum_e |q_e key_je|, which
// bounds |s_j| and every partial sum of the dot in any order: tensor cores leave the order
// unknown, so partial sums are bounded by sums of magnitudes):
//   score roundings (random): 575 adds, c = u_n a_j each (u_n = min(u_a, 2^-24)); the scale
//     multiply and a log2(e) fold, c = u |s_j| each; s_j - m, c = u |s_j - m|. R_j = their sum
//     (the worst case of eps_j), g_j = sum of their squares.
//   directed (worst): delta_j <= 575 (u_a - u_n) a_j + op_j, op_j the operand rounding (item 1
//     of the worst case); approximate (worst): the exp, once per weight and once per rescale a
//     key's sums go through, and the merge weight (eta = 2 u (Smax + ln n + ln S + 1) + 2 u_x):
//     chain = (1 + u_x)^(1 + tiles) (1 + eta).
//   The common factor of (*) is taken at the top key j* = argmax s_j, so e_j = exp(rho_j +
//     delta'_j) c_j - 1 with rho_j = eps_j - eps_* (|rho_j| <= R_j + R_*), delta'_j = delta_j
//     - delta_*, |c_j - 1| <= chain - 1, and e_* = c_* - 1: a row one key dominates keeps a small
//     ebar however large its scores. e_j = rho_j + d_j with |d_j| <= D_j = rho^2 e^rho / 2 +
//     e^rho (chain e^delta' - 1), |e_j| <= E_j = chain e^(rho + delta') - 1; Ebar = sum w_j E_j.
//     The shift leaves the random numerator as sum_j w_j eps_j (v_jk - r_k): eps_* multiplies
//     sum_j w_j (v_jk - r_k) = 0.
// Per element k (A_k = sum_j w_j |v_jk|, vmax_k = max_j |v_jk|, M_k = A_k + Ebar vmax_k >=
// sum_j w_j (1 + E_j) |v_jk|; N = n + 2 tiles + 2 roundings of each sum, tiles as above):
//   T1 = sum_j w_j eps_j (v_jk - r_k): sum c <= max R_j (A_k + |r_k|),
//        sum c^2 <= max g_j sum_j w_j^2 (v_jk - r_k)^2.
//   T2 = sum_j w_j d_j (v_jk - r_k) (worst): <= min(max D_j (A_k + |r_k|),
//        (sum_j w_j D_j)(vmax_k + |r_k|)).
//   T3 = sum_j w_j (1 + e_j) pi_j v_jk: sum c <= u_p' M_k, sum c^2 <= u_p'^2 (sum_j w_j^2
//        v_jk^2 + sum_j w_j^2 (2 E_j + E_j^2) vmax_k^2) (u_p' adds u_a for the product when P is
//        wider than bf16).
//   T4 = alpha_k / l: N roundings of partial sums <= (1 + u_p) M_k l, c = u_n times that;
//        directed part (u_a - u_n) N times that (worst).
//   T5 = r_k beta / l: N roundings of partial sums <= (1 + Ebar) l, c = u_n (1 + Ebar) |r_k|;
//        directed part likewise.
//   T6 (worst): the merge's sums and the partial's division and storage, (gamma_{S+2}(u) + 2 u)
//        (1 + u_p) M_k; a V that is not bf16-exact, u_op A_k.
//   |o_k - r_k| <= [T2 + T6 + directed + min(sum c, lambda sqrt(sum c^2))] / (1 - Ebar - B),
//   B = gamma_N(u_a)(1 + Ebar) the worst |beta / l|; then (1 + u_o) for the output rounding, and
//   u_o |ref| per element in the comparison. Rows with Ebar + B >= 1/2 get no probable bound.
// The lse: lse_hat - lse = ln(1 + ebar' + beta / l) + the log, merge and final roundings, where
// ebar' is ebar with absolute score errors (m_hat + ln sum exp(s_hat - m_hat) = ln sum exp(s_hat)
// whatever m_hat is). Z = sum_j w_j D_j + directed + min(sum c, lambda sqrt(sum c^2)) over
// c = w_j (each score rounding) and the N roundings of l; |ln(1 + z)| <= Z / (1 - Z); plus u_x
// (ln n + 1) for ln l, u_x (ln S + 1) + eta for the merge, 3 u (|lse| + ln n + 1) for the adds.
// Exps that underflow to 0 lose weights below 2^-126 relative: below every other term.
ProbableBound probable_bound(const VerifyParams& p, int32_t i, const Numerics& nm,
                             int32_t partials) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RequestExtent e = request_extent(p, i);
  const int64_t n = e.prefix_len + e.draft_nodes;
  const int32_t H = p.num_heads;
  const int64_t rows = static_cast<int64_t>(e.draft_nodes) * H;
  ProbableBound pb;
  pb.q_begin = e.q_begin;
  pb.draft_nodes = e.draft_nodes;
  pb.heads = H;
  const double inf = std::numeric_limits<double>::infinity();
  pb.o.assign(static_cast<size_t>(rows) * kLatentDim, inf);
  pb.lse.assign(static_cast<size_t>(rows), inf);
  if (rows == 0 || n == 0) return pb;

  const double u = kF32Unit, ua = nm.accumulate_unit, un = std::min(ua, u);
  const double ud = std::max(0.0, ua - un);  // directed part of a truncating accumulator
  const double ux = nm.exp_unit;
  const double up = nm.p_unit + (nm.p_unit < kBf16Unit ? ua : 0.0);
  const double sm = static_cast<double>(p.sm_scale);
  const double lambda = probable_lambda();
  const double tile = static_cast<double>(std::max(nm.tile_keys, 1));
  const double S = static_cast<double>(std::max(partials, 1));
  const double tiles = std::ceil(static_cast<double>(n) / tile) + S;  // as in derive_tolerance
  const double big_n = static_cast<double>(n) + 2.0 * tiles + 2.0;
  const double ln_n = std::log(static_cast<double>(n));
  // Partial sums computed in floating point exceed the exact sums of magnitudes by at most
  // gamma_m(u_a) relative, m the longest chain of additions (576 for a score, N for a sum).
  const double slack = 1.0 + gamma_u(std::max<double>(kRowDim, big_n), ua);

  // Queries [rows, 576] (row = t * H + h) and their norms.
  Mat q(rows, kRowDim);
  Eigen::VectorXd qn(rows);
  bool exact_qk = true, exact_v = true;
  for (int32_t t = 0; t < e.draft_nodes; ++t) {
    for (int32_t h = 0; h < H; ++h) {
      double* r = q.row(t * H + h).data();
      read_query(p, e.q_begin + t, h, r);
      for (int k = 0; k < kRowDim; ++k) exact_qk = exact_qk && bf16_exact(r[k]);
      qn(t * H + h) = q.row(t * H + h).norm();
    }
  }
  // Scores [rows, n], masked -inf, keys read in blocks (a 64k-key request would not fit whole).
  const model::BitRows block = model::draft_block(p, i);
  const int64_t kb = 2048;
  Mat s(rows, n);
  Eigen::VectorXd kn(n);
  {
    Mat keys(std::min(kb, n), kRowDim);
    for (int64_t j0 = 0; j0 < n; j0 += kb) {
      const int64_t nb = std::min(kb, n - j0);
      for (int64_t j = 0; j < nb; ++j) {
        double* r = keys.row(j).data();
        read_key(p, i, j0 + j, r);
        for (int k = 0; k < kRowDim; ++k) {
          const bool ex = bf16_exact(r[k]);
          exact_qk = exact_qk && ex;
          if (k < kLatentDim) exact_v = exact_v && ex;
        }
        kn(j0 + j) = keys.row(j).norm();
      }
      s.middleCols(j0, nb).noalias() = sm * q * keys.topRows(nb).transpose();
    }
  }
  const double op = exact_qk ? 0.0
                    : nm.operand_unit > 0 ? nm.operand_unit * (2.0 + nm.operand_unit)
                                          : gamma_u(1, ua);
  const double v_op = exact_v ? 0.0 : nm.operand_unit;

  // Per row: weights, and the per-key maxima and weighted sums the per-element terms need.
  Mat w = Mat::Zero(rows, n);
  std::vector<double> rmax(rows), gmax(rows), dmax(rows), wdsum(rows), ebar(rows), w2e(rows),
      lse_z(rows);
  std::vector<bool> ok(rows, false);
  for (int32_t t = 0; t < e.draft_nodes; ++t) {
    for (int32_t h = 0; h < H; ++h) {
      const int64_t r = t * H + h;
      double m = -inf;
      int64_t top = -1;
      for (int64_t j = 0; j < n; ++j) {
        const bool visible =
            j < e.prefix_len || block.test(t, static_cast<int32_t>(j - e.prefix_len));
        if (!visible) s(r, j) = -inf;
        if (s(r, j) > m) {
          m = s(r, j);
          top = j;
        }
      }
      if (m == -inf) continue;  // fully masked: left to the worst-case check
      double l = 0;
      for (int64_t j = 0; j < n; ++j) l += s(r, j) == -inf ? 0.0 : std::exp(s(r, j) - m);
      const double lse = m + std::log(l);
      const double smax = sm * qn(r) * kn.maxCoeff();
      const double eta = 2.0 * u * (smax + ln_n + std::log(S) + 1.0) + 2.0 * ux;
      const double chain = std::pow(1.0 + ux, 1.0 + tiles) * (1.0 + eta);
      // Key j's worst random score error (R_j), the sum of squares of its bounds (g_j), and
      // the worst directed part of its score error (a truncating accumulator, operand rounding).
      auto key_terms = [&](int64_t j, double& rj, double& gj, double& dirj) {
        const double aj = sm * qn(r) * kn(j) * slack;
        const double sj = std::fabs(s(r, j)), xj = s(r, j) - m;
        rj = 575.0 * un * aj + 2.0 * u * sj + u * std::fabs(xj);
        gj = 575.0 * (un * aj) * (un * aj) + 2.0 * (u * sj) * (u * sj) + (u * xj) * (u * xj);
        dirj = 575.0 * ud * aj + op * aj;
      };
      // o: the common factor is taken at the top key j* (a factor common to every weight
      // cancels in o), so e_j = exp(rho_j + delta_j) c_j - 1 with rho_j = eps_j - eps_* (random,
      // |rho_j| <= R_j + R_*), delta_j its directed part, c_j the exp/rescale/merge factor
      // (|c_j - 1| <= chain - 1), and e_* = c_* - 1 carries no score error: a row one key
      // dominates keeps a small ebar however large its scores. T1 is unchanged by the shift
      // (eps_* sum_j w_j (v_jk - r_k) = 0). d_j = e_j - rho_j, |d_j| <= rho^2 e^rho / 2 +
      // e^rho (chain e^delta - 1). The lse needs the absolute errors (rho = eps_j).
      double r_top = 0, g_top = 0, dir_top = 0;
      key_terms(top, r_top, g_top, dir_top);
      double rm = 0, gm = 0, dm = 0, wd = 0, eb = 0, we2 = 0;
      double z_sum = 0, z_var = 0, z_det = 0, eb_abs = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (s(r, j) == -inf) continue;
        const double wj = std::exp(s(r, j) - m) / l;
        w(r, j) = wj;
        double rj, gj, dirj;
        key_terms(j, rj, gj, dirj);
        const double rho = j == top ? 0.0 : rj + r_top;
        const double edj = chain * std::exp(j == top ? 0.0 : dirj + dir_top) - 1.0;
        const double ej = (1.0 + edj) * std::exp(rho) - 1.0;
        const double dj = rho * rho * std::exp(rho) / 2.0 + edj * std::exp(rho);
        rm = std::max(rm, rj);
        gm = std::max(gm, gj);
        dm = std::max(dm, dj);
        wd += wj * dj;
        eb += wj * ej;
        we2 += wj * wj * (2.0 * ej + ej * ej);
        // lse: absolute score errors.
        const double ed_abs = chain * std::exp(dirj) - 1.0;
        z_sum += wj * rj;
        z_var += wj * wj * gj;
        z_det += wj * (rj * rj * std::exp(rj) / 2.0 + ed_abs * std::exp(rj));
        eb_abs += wj * ((1.0 + ed_abs) * std::exp(rj) - 1.0);
      }
      const double bsum = gamma_u(big_n, ua) * (1.0 + eb);
      if (eb + bsum >= 0.5) continue;  // outside the first-order regime: worst case only
      ok[r] = true;
      rmax[r] = rm;
      gmax[r] = gm;
      dmax[r] = dm;
      wdsum[r] = wd;
      ebar[r] = eb;
      w2e[r] = we2;
      // The lse (natural log): l's N roundings of partial sums <= (1 + ebar') l.
      const double cl = un * (1.0 + eb_abs) * slack;
      z_sum += big_n * cl;
      z_var += big_n * cl * cl;
      z_det += big_n * ud * (1.0 + eb_abs);
      const double z = z_det + std::min(z_sum, lambda * std::sqrt(z_var));
      lse_z[r] = z < 0.5 ? z / (1.0 - z) + ux * (ln_n + 1.0) + ux * (std::log(S) + 1.0) + eta +
                               3.0 * u * (std::fabs(lse) + ln_n + 1.0)
                         : inf;
    }
  }
  // Per element: r = W V, A = W |V|, W2 V, W2 V^2 (W2 = w o w), keys in blocks again.
  Mat ref = Mat::Zero(rows, kLatentDim), a_abs = ref, q1 = ref, q2 = ref;
  Eigen::VectorXd vmax = Eigen::VectorXd::Zero(kLatentDim);  // max_j |v_jk| over the keys
  const Mat w2 = w.cwiseProduct(w);
  {
    Mat v(std::min(kb, n), kLatentDim);
    double row[kRowDim];
    for (int64_t j0 = 0; j0 < n; j0 += kb) {
      const int64_t nb = std::min(kb, n - j0);
      for (int64_t j = 0; j < nb; ++j) {
        read_key(p, i, j0 + j, row);
        for (int k = 0; k < kLatentDim; ++k) v(j, k) = row[k];
      }
      auto vb = v.topRows(nb);
      vmax = vmax.cwiseMax(vb.cwiseAbs().colwise().maxCoeff().transpose());
      ref.noalias() += w.middleCols(j0, nb) * vb;
      a_abs.noalias() += w.middleCols(j0, nb) * vb.cwiseAbs();
      q1.noalias() += w2.middleCols(j0, nb) * vb;
      q2.noalias() += w2.middleCols(j0, nb) * vb.cwiseAbs2();
    }
  }
  const Eigen::VectorXd w2sum = w2.rowwise().sum();
  const double uo = output_unit(p.o_dtype);
  const double merge = gamma_f32(S + 2.0) + 2.0 * u;
  for (int64_t r = 0; r < rows; ++r) {
    if (!ok[static_cast<size_t>(r)]) continue;
    const double eb = ebar[r];
    const double denom = 1.0 - eb - gamma_u(big_n, ua) * (1.0 + eb);
    pb.lse[static_cast<size_t>(r)] = lse_z[r];
    for (int k = 0; k < kLatentDim; ++k) {
      const double rk = ref(r, k), ak = a_abs(r, k), ark = std::fabs(rk), vm = vmax(k);
      // sum_j w_j^2 (v_jk - r_k)^2, expanded; >= 0 up to rounding.
      const double dev2 = std::max(0.0, q2(r, k) - 2.0 * rk * q1(r, k) + rk * rk * w2sum(r));
      // sum_j w_j (1 + e_j) |v_jk| <= A_k + ebar vmax_k: the magnitudes P.V's partial sums reach.
      const double mag = ak + eb * vm;
      const double acc_mag = (1.0 + nm.p_unit) * mag * slack;
      const double l_mag = (1.0 + eb) * ark * slack;
      const double sum_c =
          rmax[r] * (ak + ark) + up * mag + big_n * un * acc_mag + big_n * un * l_mag;
      const double var = gmax[r] * dev2 + up * up * (q2(r, k) + w2e[r] * vm * vm) +
                         big_n * (un * acc_mag) * (un * acc_mag) + big_n * (un * l_mag) * (un * l_mag);
      const double t2 = std::min(dmax[r] * (ak + ark), wdsum[r] * (vm + ark));
      const double det = t2 + ud * big_n * (acc_mag + l_mag) + merge * acc_mag + v_op * ak;
      const double x = (det + std::min(sum_c, lambda * std::sqrt(var))) / denom;
      pb.o[static_cast<size_t>(r) * kLatentDim + k] = x * (1.0 + uo);
    }
  }
  return pb;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Accumulates the Frobenius, cosine and worst-element statistics of one comparison.
struct Accumulator {
  double diff2 = 0, ref2 = 0, out2 = 0, dot = 0, ref_max = 0;
  double worst_ratio = -1;
  double worst_lse_ratio = -1;
  Comparison c;

  // The aggregate statistics of one finite pair (o the output, r the reference).
  void stats(double o, double r) {
    const double err = std::fabs(o - r);
    diff2 += err * err;
    ref2 += r * r;
    out2 += o * o;
    dot += o * r;
    ref_max = std::max(ref_max, std::fabs(r));
    c.max_abs = std::max(c.max_abs, err);
  }

  // `bound` is the worst-case (hard) bound; `probable` the probable one (+inf: none).
  void element(double o, double r, double bound, const WorstIndex& at, double probable = kInf) {
    if (!std::isfinite(o)) {
      ++c.nonfinite;
      ++c.violations;
      if (worst_ratio < kInf) {
        worst_ratio = kInf;
        c.worst = at;
        c.worst_err = kInf;
        c.worst_bound = std::min(bound, probable);
      }
      return;
    }
    stats(o, r);
    const double err = std::fabs(o - r);
    auto ratio_of = [&](double b) {
      return b > 0 ? err / b : (err > 0 ? std::numeric_limits<double>::max() : 0.0);
    };
    if (err > bound) {
      ++c.violations;
    } else if (err > probable) {
      ++c.improbable;
    }
    c.worst_hard_ratio = std::max(c.worst_hard_ratio, ratio_of(bound));
    if (probable < kInf) c.worst_probable_ratio = std::max(c.worst_probable_ratio, ratio_of(probable));
    const double tight = std::min(bound, probable);
    const double ratio = ratio_of(tight);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.worst = at;
      c.worst_err = err;
      c.worst_bound = tight;
    }
  }

  void lse(double o, double r, double bound, const WorstIndex& at, double probable = kInf) {
    bool both_neg_inf = std::isinf(o) && std::isinf(r) && o < 0 && r < 0;
    if (both_neg_inf) return;
    if (!std::isfinite(o) || !std::isfinite(r)) {
      ++c.nonfinite;
      ++c.violations;
      c.worst_lse = at;
      worst_lse_ratio = kInf;
      c.max_lse_err = kInf;
      return;
    }
    double err = std::fabs(o - r);
    c.max_lse_err = std::max(c.max_lse_err, err);
    if (err > bound) {
      ++c.violations;
    } else if (err > probable) {
      ++c.improbable;
    }
    if (probable < kInf && probable > 0) {
      c.worst_lse_probable_ratio = std::max(c.worst_lse_probable_ratio, err / probable);
    }
    const double tight = std::min(bound, probable);
    double ratio = tight > 0 ? err / tight : (err > 0 ? 1e300 : 0.0);
    if (ratio > worst_lse_ratio) {
      worst_lse_ratio = ratio;
      c.worst_lse = at;
    }
  }

  Comparison finish() {
    c.rel_frobenius = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    c.max_abs_rel = ref_max > 0 ? c.max_abs / ref_max : c.max_abs;
    c.cosine = (ref2 > 0 && out2 > 0) ? dot / std::sqrt(ref2 * out2) : (diff2 == 0 ? 1.0 : 0.0);
    c.pass = c.violations == 0 && c.improbable == 0;
    return c;
  }
};

}  // namespace

Comparison compare_to_model(model::VerifyBatch& batch, const RunOutput& out,
                            const model::RefResult& ref, const Capabilities& declared) {
  Accumulator acc;
  const VerifyParams p = batch.params();
  const int32_t partials = declared_partials(declared, p);
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    RequestView rv = request_view(batch, i);
    Tolerance tol = derive_tolerance(p, i, rv, declared);
    ProbableBound pb = probable_bound(p, i, declared.numerics, partials);
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < out.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          double r = ref.o(t, h, k);
          const double round = tol.o_unit * std::fabs(r);
          acc.element(out.o_at(t, h, k), r, tol.o_abs + round, WorstIndex{i, q, t, h, k},
                      pb.at(q, h, k) + round);
        }
        if (declared.writes_lse) {
          acc.lse(out.lse_at(t, h), ref.lse_at(t, h), tol.lse_abs, WorstIndex{i, q, t, h, -1},
                  pb.lse_at(q, h));
        }
      }
    }
  }
  return acc.finish();
}

Comparison compare_runs_within(model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                               const Capabilities& declared,
                               const std::vector<int32_t>& requests) {
  std::vector<std::pair<int32_t, RequestView>> views;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    if (requests.empty() || std::find(requests.begin(), requests.end(), i) != requests.end()) {
      views.emplace_back(i, request_view(batch, i));
    }
  }
  return compare_runs_within(batch.params(), views, a, b, declared);
}

namespace {

// a's requests `views_a` of launch pa against the same requests `views_b` of launch pb.
Comparison runs_within(const VerifyParams& pa,
                       const std::vector<std::pair<int32_t, RequestView>>& views_a,
                       const VerifyParams& pb,
                       const std::vector<std::pair<int32_t, RequestView>>& views_b,
                       const RunOutput& a, const RunOutput& b, const Capabilities& declared) {
  Accumulator acc;
  for (size_t v = 0; v < views_a.size(); ++v) {
    const auto& [i, rv] = views_a[v];
    const Tolerance tol_a = derive_tolerance(pa, i, rv, declared);
    const Tolerance tol_b = derive_tolerance(pb, views_b[v].first, views_b[v].second, declared);
    const double uo = tol_a.o_unit;  // the output dtype's, the same for both launches
    const double o_tol = (tol_a.o_abs + tol_b.o_abs) * (1.0 + 2.0 * uo);
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      int64_t tb = views_b[v].second.q_begin + q;
      for (int32_t h = 0; h < a.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          double x = a.o_at(t, h, k), y = b.o_at(tb, h, k);
          double bound = o_tol + 2.0 * uo * std::max(std::fabs(x), std::fabs(y));
          // b plays the reference: its non-finite values are as much a failure as a's.
          if (!std::isfinite(y)) {
            acc.element(y, x, bound, WorstIndex{i, q, t, h, k});
          } else {
            acc.element(x, y, bound, WorstIndex{i, q, t, h, k});
          }
        }
        if (declared.writes_lse) {
          acc.lse(a.lse_at(t, h), b.lse_at(tb, h), tol_a.lse_abs + tol_b.lse_abs,
                  WorstIndex{i, q, t, h, -1});
        }
      }
    }
  }
  return acc.finish();
}

}  // namespace

Comparison compare_runs_within(const VerifyParams& p,
                               const std::vector<std::pair<int32_t, RequestView>>& views,
                               const RunOutput& a, const RunOutput& b,
                               const Capabilities& declared) {
  return runs_within(p, views, p, views, a, b, declared);
}

Comparison compare_runs_within(model::VerifyBatch& batch_a, const RunOutput& a,
                               model::VerifyBatch& batch_b, const RunOutput& b,
                               const Capabilities& declared) {
  std::vector<std::pair<int32_t, RequestView>> views_a, views_b;
  for (int32_t i = 0; i < batch_a.real_batch_size(); ++i) {
    views_a.emplace_back(i, request_view(batch_a, i));
    views_b.emplace_back(i, request_view(batch_b, i));
  }
  return runs_within(batch_a.params(), views_a, batch_b.params(), views_b, a, b, declared);
}

Comparison compare_bits(const model::VerifyBatch& batch, const RunOutput& a, const RunOutput& b,
                        const Capabilities& declared, const std::vector<int32_t>& requests) {
  std::vector<int32_t> which = requests;
  if (which.empty()) {
    for (int32_t i = 0; i < batch.real_batch_size(); ++i) which.push_back(i);
  }
  std::vector<std::pair<int32_t, RequestView>> views;
  for (int32_t i : which) views.emplace_back(i, request_view(batch, i));
  return compare_bits(views, a, b, declared);
}

// Every finite pair enters the aggregate statistics (the norms, the dot, max |ref|), equal or not:
// leaving the differing elements out made the norm of the reference smaller than it is and the
// cosine blind to them (a report read "relative Frobenius 56, cosine 1"). A differing element
// with a non-finite side counts as non-finite and stays out of the aggregates.
Comparison compare_bits(const std::vector<std::pair<int32_t, RequestView>>& views,
                        const RunOutput& a, const RunOutput& b, const Capabilities& declared) {
  Accumulator acc;
  auto same_bits = [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  for (const auto& [i, rv] : views) {
    for (int64_t q = 0; q < rv.draft_nodes; ++q) {
      int64_t t = rv.q_begin + q;
      for (int32_t h = 0; h < a.heads; ++h) {
        for (int32_t k = 0; k < kLatentDim; ++k) {
          float x = a.o_at(t, h, k), y = b.o_at(t, h, k);
          if (same_bits(x, y)) {
            if (std::isfinite(x)) acc.stats(x, y);
            continue;
          }
          ++acc.c.violations;
          const bool finite = std::isfinite(x) && std::isfinite(y);
          double err = finite ? std::fabs(static_cast<double>(x) - y) : kInf;
          if (err > acc.worst_ratio) {
            acc.worst_ratio = err;
            acc.c.worst = WorstIndex{i, q, t, h, k};
            acc.c.worst_err = err;
            acc.c.worst_bound = 0;
          }
          if (finite) {
            acc.stats(x, y);
          } else {
            ++acc.c.nonfinite;
          }
        }
        float x = a.lse_at(t, h), y = b.lse_at(t, h);
        if (declared.writes_lse && !same_bits(x, y)) {
          ++acc.c.violations;
          acc.c.worst_lse = WorstIndex{i, q, t, h, -1};
          double err = std::fabs(static_cast<double>(x) - y);
          acc.c.max_lse_err = std::isnan(err) ? kInf : std::max(acc.c.max_lse_err, err);
        }
      }
    }
  }
  Comparison c = acc.finish();
  c.worst_hard_ratio = c.violations ? kInf : 0.0;
  return c;
}

}  // namespace mlaverify::props

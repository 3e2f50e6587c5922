// The reference verify attention (docs/spec.md §1, §3, §6): exact math in double, read straight
// from a VerifyParams so it sees the very stored bf16/fp32 values a kernel reads, in any KvLayout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::model {

// Per-head widths of the non-absorbed form. Every shipped preset (model/config.h) uses 128 for
// both; the absorbed form never needs them.
inline constexpr int kNopeDim = 128;   // qk_nope_head_dim
inline constexpr int kVHeadDim = 128;  // v_head_dim

// The log base of the reported lse: natural (SGLang, this library's kernels) or base 2
// (FlashInfer reports lse / ln 2).
enum class LseBase : int32_t {
  Natural = 0,
  Base2 = 1,
};

struct RefResult {
  int64_t tokens = 0;         // T = qo_indptr[bs]: every row of the metadata, padded rows too
  int32_t heads = 0;          // H
  std::vector<double> o_lat;  // [T, H, 512] softmax-weighted latent; zeros for a fully masked row
  std::vector<double> lse;    // [T, H] log-sum-exp of the scaled scores; -inf if fully masked

  double o(int64_t token, int32_t head, int32_t k) const {
    return o_lat[(static_cast<size_t>(token) * heads + head) * kLatentDim + k];
  }
  double lse_at(int64_t token, int32_t head) const {
    return lse[static_cast<size_t>(token) * heads + head];
  }
};

// The absorbed verify attention of every request in p (host pointers), validated first with
// model::validate_params (bad metadata raises InvalidInput, never a wild read):
//   s[t, h, n] = sm_scale * (q_lat . c_n + q_pe . k_pe_n) over the P_i prefix keys then the D_i
//   draft keys, a draft key j visible to draft query t iff draft_block(p, i).test(t, j);
//   o_lat = softmax(s) @ c (V is c); lse = ln sum exp(s) (or / ln 2 for Base2).
// sm_scale is the float p.sm_scale, widened: the value the kernel multiplies by.
RefResult reference_verify(const VerifyParams& p, LseBase base = LseBase::Natural);

// The stored values a kernel reads, widened to double (exact), as the model reads them. Key j of
// request i counts prefix keys first (j < P_i, through kv_indices and the pool layout), then draft
// node j - P_i (from k_extend rows or the draft cache slots, per p.draft_source). Rows are
// latent-first [576]: [c | k_pe] and [q_lat | q_pe]. Assumes p passed validate_params.
void read_key(const VerifyParams& p, int32_t request, int64_t j, double* row576);
void read_query(const VerifyParams& p, int64_t token, int32_t head, double* row576);

// The scaled scores of one request, masked entries -inf: [D_i, H, P_i + D_i] (prefix keys first,
// then draft keys in node order). For tests and diagnostics; validates p like reference_verify.
std::vector<double> reference_scores(const VerifyParams& p, int32_t request);

// q_lat[t, h] = q_nope[t, h] @ W_kc[h]: the query absorption of docs/spec.md §1.
// q_nope [T, H, 128], w_kc [H, 128, 512] -> [T, H, 512]. Sizes are checked (InvalidInput).
std::vector<double> absorb_query(const std::vector<double>& q_nope,  // [T, H, 128]
                                 const std::vector<double>& w_kc,    // [H, 128, 512]
                                 int32_t heads);

// The non-absorbed form of the same attention, computed the long way for every key n:
//   k_nope = W_kc[h] c_n (128), v = W_vc[h]^T c_n (128), s = sm_scale * (q_nope . k_nope +
//   q_pe . k_pe), o_full = softmax(s) @ v.
// q_pe, the keys, the mask and sm_scale come from p; p's stored q_lat is not read. Returns the
// latent output softmax(s) @ c and lse of these scores (comparable with reference_verify), and
// writes o_full [T, H, 128] when o_full is not null. Sizes are checked against p: q_nope has
// T * H * 128 entries, w_kc and w_vc H * 128 * 512 (InvalidInput naming the argument).
RefResult nonabsorbed_verify(const VerifyParams& p,
                             const std::vector<double>& q_nope,  // [T, H, 128]
                             const std::vector<double>& w_kc,    // [H, 128, 512]
                             const std::vector<double>& w_vc,    // [H, 512, 128]
                             std::vector<double>* o_full);       // [T, H, 128] out, optional

// The non-absorbed scores of one request: [D_i, H, P_i + D_i], masked entries -inf.
std::vector<double> nonabsorbed_scores(const VerifyParams& p, int32_t request,
                                       const std::vector<double>& q_nope,  // [T, H, 128]
                                       const std::vector<double>& w_kc);   // [H, 128, 512]

}  // namespace mlaverify::model

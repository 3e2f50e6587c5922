// Tests of the reference verify attention (model/attention.h) and ModelBackend: a case worked on
// paper, absorbed == non-absorbed, chain == causal, masking, layouts, lse base, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/model_backend.h"
#include "model/storage.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::expect_invalid;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU = 0x1p-53;  // unit roundoff of double

// Higham's gamma_n = n u / (1 - n u): a sum or dot product of n terms computed in double, in any
// order, is within gamma_n * sum|terms| of the exact value.
double gamma(double n) { return n * kU / (1.0 - n * kU); }

// ---------------------------------------------------------------------------------------------
// Local fixture: logical data (doubles that are exact bf16 values) stored into real buffers in a
// chosen layout, with metadata and a FULL_MASK encoded here, independently of model/mask.h.
// ---------------------------------------------------------------------------------------------

struct ReqSpec {
  std::vector<int32_t> parents;  // [D] parent array, parents[0] = -1
  int64_t prefix_len = 0;
};

// Draft query t sees draft column j iff j is t or one of its ancestors: walk the parent chain.
bool tree_visible(const std::vector<int32_t>& parents, int32_t t, int32_t j) {
  for (int32_t a = t; a >= 0; a = parents[a]) {
    if (a == j) return true;
  }
  return false;
}

struct Logical {
  int32_t heads = 1;
  float sm_scale = 0.125f;
  std::vector<ReqSpec> reqs;
  std::vector<double> q;                  // [T, H, 576] latent-first
  std::vector<std::vector<double>> keys;  // per request [P_i + D_i, 576] latent-first, prefix first

  int64_t q_begin(size_t i) const {
    int64_t b = 0;
    for (size_t r = 0; r < i; ++r) b += static_cast<int64_t>(reqs[r].parents.size());
    return b;
  }
  int64_t tokens() const { return q_begin(reqs.size()); }
  double q_at(int64_t token, int32_t h, int k) const {
    return q[(static_cast<size_t>(token) * heads + h) * kRowDim + k];
  }
};

// A normal sample rounded to bf16, so every storage dtype holds it exactly.
double bf16_sample(std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> nd(0.0, scale);
  return static_cast<double>(bf16_to_float(double_to_bf16(nd(rng))));
}

std::vector<int32_t> random_parents(std::mt19937_64& rng, int32_t d) {
  std::vector<int32_t> parents(d, -1);
  for (int32_t t = 1; t < d; ++t) {
    parents[t] = std::uniform_int_distribution<int32_t>(0, t - 1)(rng);
  }
  return parents;
}

std::vector<int32_t> chain_parents(int32_t d) {
  std::vector<int32_t> parents(d);
  for (int32_t t = 0; t < d; ++t) parents[t] = t - 1;
  return parents;
}

Logical random_logical(std::vector<ReqSpec> reqs, int32_t heads, uint64_t seed,
                       double scale = 1.0) {
  std::mt19937_64 rng(seed);
  Logical L;
  L.heads = heads;
  L.reqs = std::move(reqs);
  L.q.resize(static_cast<size_t>(L.tokens()) * heads * kRowDim);
  for (double& v : L.q) v = bf16_sample(rng, scale);
  for (const ReqSpec& r : L.reqs) {
    std::vector<double> k((r.prefix_len + static_cast<int64_t>(r.parents.size())) * kRowDim);
    for (double& v : k) v = bf16_sample(rng, scale);
    L.keys.push_back(std::move(k));
  }
  return L;
}

enum class PoolForm { LatentFirst, Padded640, Split, RopeFirst };

struct StoreOptions {
  PoolForm pool = PoolForm::LatentFirst;
  DType kv_dtype = DType::BF16;
  DType q_dtype = DType::BF16;
  bool q_rope_first = false;  // q rows stored [q_pe | q_lat], read via the query offsets
  int64_t q_head_pad = 0;     // poisoned elements after each q head row
  DraftKvSource draft = DraftKvSource::ExtendRows;
  DType o_dtype = DType::F32;
  int64_t o_head_pad = 0;  // sentinel elements after each o head row (must stay untouched)
  uint64_t slot_seed = 7;
  int64_t spare_rows = 0;  // rows of q, k_extend, o and lse past T (max_total_q = T + spare)
};

// Raw storage of `elements` elements of dtype d, every byte 0xff first: NaN in bf16 and fp32, so a
// read of anything the metadata does not name shows up as NaN in the output.
std::vector<uint32_t> poisoned(DType d, int64_t elements) {
  return std::vector<uint32_t>((elements * dtype_bytes(d) + 3) / 4, 0xffffffffu);
}

class Stored {
 public:
  Stored(const Logical& L, const StoreOptions& opt) : L_(L), opt_(opt) {
    const int32_t H = L.heads;
    const int64_t T = L.tokens();
    rows_ = std::max<int64_t>(T + opt.spare_rows, 1);
    int64_t total_keys = 0;
    for (size_t i = 0; i < L.reqs.size(); ++i) {
      total_keys += L.reqs[i].prefix_len + static_cast<int64_t>(L.reqs[i].parents.size());
    }
    pool_slots_ = total_keys + 4;  // slot 0 and three more are never named: poisoned
    switch (opt.pool) {
      case PoolForm::LatentFirst:
        layout_ = KvLayout::latent_first();
        break;
      case PoolForm::Padded640:
        layout_ = KvLayout::latent_first(640);
        break;
      case PoolForm::RopeFirst:
        layout_ = KvLayout::rope_first();
        break;
      case PoolForm::Split:
        // FlashInfer-style separate views with odd offsets and strides: ckv [slots, 520] from
        // element 8, then kpe [slots, 67] after it.
        layout_ = KvLayout::split(8, 520, 8 + pool_slots_ * 520 + 3, 67);
        break;
    }
    int64_t pool_elems = std::max(layout_.latent_index(pool_slots_ - 1) + kLatentDim,
                                  layout_.rope_index(pool_slots_ - 1) + kRopeDim);
    pool_ = poisoned(opt.kv_dtype, pool_elems);

    // Slots: a seeded permutation of 1 .. pool_slots - 1, taken in order.
    std::vector<int64_t> free_slots;
    for (int64_t s = 1; s < pool_slots_; ++s) free_slots.push_back(s);
    std::mt19937_64 rng(opt.slot_seed);
    std::shuffle(free_slots.begin(), free_slots.end(), rng);
    size_t next = 0;

    ext_stride_ = opt.pool == PoolForm::Padded640 ? 640 : kRowDim;
    k_extend_ = poisoned(opt.kv_dtype, rows_ * ext_stride_);
    qo_indptr_.push_back(0);
    kv_indptr_.push_back(0);
    mask_indptr_.push_back(0);
    for (size_t i = 0; i < L.reqs.size(); ++i) {
      const ReqSpec& r = L.reqs[i];
      const int32_t D = static_cast<int32_t>(r.parents.size());
      const int64_t P = r.prefix_len;
      const int64_t qb = L.q_begin(i);
      for (int64_t n = 0; n < P + D; ++n) {
        const double* row = &L.keys[i][n * kRowDim];  // [576] latent-first
        if (n < P || opt.draft == DraftKvSource::CacheSlots) {
          int64_t slot = free_slots[next++];
          kv_indices_.push_back(slot);
          write_slot(slot, row);
        } else {
          for (int k = 0; k < kRowDim; ++k) {
            store(opt.kv_dtype, k_extend_.data(), (qb + n - P) * ext_stride_ + k, row[k]);
          }
        }
      }
      qo_indptr_.push_back(qo_indptr_.back() + D);
      kv_indptr_.push_back(static_cast<int32_t>(kv_indices_.size()));
      // FULL_MASK: [D, P + D] row-major, prefix columns ones, draft block from the parents.
      for (int32_t t = 0; t < D; ++t) {
        for (int64_t c = 0; c < P + D; ++c) {
          mask.push_back(c < P || tree_visible(r.parents, t, static_cast<int32_t>(c - P)) ? 1 : 0);
        }
      }
      mask_indptr_.push_back(static_cast<int64_t>(mask.size()));
    }

    q_head_stride_ = kRowDim + opt.q_head_pad;
    q_ = poisoned(opt.q_dtype, rows_ * H * q_head_stride_);
    for (int64_t t = 0; t < T; ++t) {
      for (int32_t h = 0; h < H; ++h) {
        int64_t base = (t * H + h) * q_head_stride_;
        for (int k = 0; k < kRowDim; ++k) {
          // latent-first row: [q_lat | q_pe]; rope-first: [q_pe | q_lat].
          int64_t at = opt.q_rope_first ? (k < kLatentDim ? kRopeDim + k : k - kLatentDim) : k;
          store(opt.q_dtype, q_.data(), base + at, L.q_at(t, h, k));
        }
      }
    }
    o_head_stride_ = kLatentDim + opt.o_head_pad;
    // Sentinel 0x5a5a...: finite in both dtypes, and no value the model writes.
    o_ = std::vector<uint32_t>((rows_ * H * o_head_stride_ * dtype_bytes(opt.o_dtype) + 3) / 4,
                               0x5a5a5a5au);
    lse_.assign(rows_ * H, std::numeric_limits<float>::quiet_NaN());
  }
  Stored(const Stored&) = delete;
  Stored& operator=(const Stored&) = delete;

  VerifyParams params() {
    VerifyParams p;
    p.batch_size = static_cast<int32_t>(L_.reqs.size());
    p.num_heads = L_.heads;
    int32_t max_d = 1;
    for (const ReqSpec& r : L_.reqs) max_d = std::max<int32_t>(max_d, r.parents.size());
    p.max_draft = max_d;
    p.max_total_q = rows_;
    p.num_splits = 1;
    p.sm_scale = L_.sm_scale;
    p.q = q_.data();
    p.q_dtype = opt_.q_dtype;
    p.q_head_stride = q_head_stride_;
    p.q_token_stride = L_.heads * q_head_stride_;
    p.q_latent_offset = opt_.q_rope_first ? kRopeDim : 0;
    p.q_rope_offset = opt_.q_rope_first ? 0 : kLatentDim;
    p.kv_pool = pool_.data();
    p.kv_dtype = opt_.kv_dtype;
    p.kv_layout = layout_;
    p.pool_slots = pool_slots_;
    p.qo_indptr = qo_indptr_.data();
    p.kv_indptr = kv_indptr_.data();
    p.kv_indices = kv_indices_.data();
    p.kv_indices_len = static_cast<int64_t>(kv_indices_.size());
    p.draft_source = opt_.draft;
    p.k_extend = k_extend_.data();
    p.k_extend_stride = ext_stride_;
    p.mask_format = MaskFormat::FullMask;
    p.mask = mask.data();
    p.mask_len = static_cast<int64_t>(mask.size());
    p.mask_indptr = mask_indptr_.data();
    p.mask_indptr_convention = IndptrConvention::Csr;
    p.o_lat = o_.data();
    p.o_dtype = opt_.o_dtype;
    p.o_head_stride = o_head_stride_;
    p.o_token_stride = L_.heads * o_head_stride_;
    p.lse = lse_.data();
    return p;
  }

  // Output element k of (token, head) as stored, and the raw element index (for padding checks).
  double o_at(int64_t t, int32_t h, int64_t k) const {
    return load(opt_.o_dtype, o_.data(), (t * L_.heads + h) * o_head_stride_ + k);
  }
  float lse_at(int64_t t, int32_t h) const { return lse_[t * L_.heads + h]; }
  const std::vector<uint32_t>& raw_o() const { return o_; }
  std::vector<int64_t>& kv_indices() { return kv_indices_; }

  std::vector<uint8_t> mask;  // FULL_MASK bytes; tests may rewrite them

 private:
  void write_slot(int64_t slot, const double* row) {
    for (int k = 0; k < kLatentDim; ++k) {
      store(opt_.kv_dtype, pool_.data(), layout_.latent_index(slot) + k, row[k]);
    }
    for (int k = 0; k < kRopeDim; ++k) {
      store(opt_.kv_dtype, pool_.data(), layout_.rope_index(slot) + k, row[kLatentDim + k]);
    }
  }

  const Logical& L_;
  StoreOptions opt_;
  KvLayout layout_ = KvLayout::latent_first();
  int64_t pool_slots_ = 0;
  int64_t rows_ = 1;  // max_total_q
  int64_t ext_stride_ = kRowDim;
  int64_t q_head_stride_ = kRowDim;
  int64_t o_head_stride_ = kLatentDim;
  std::vector<uint32_t> pool_, k_extend_, q_, o_;
  std::vector<int32_t> qo_indptr_, kv_indptr_;
  std::vector<int64_t> kv_indices_, mask_indptr_;
  std::vector<float> lse_;
};

// ---------------------------------------------------------------------------------------------
// An independent reference: one query row against an explicit key list, plain loops.
// ---------------------------------------------------------------------------------------------

struct PlainRow {
  std::vector<double> o;  // [512]
  double lse = -kInf;
  double score_mag = 0;  // max over visible keys of sm_scale * sum_k |q_k key_k|
  int64_t keys = 0;      // N, keys in the list
};

PlainRow plain_attention(const double* q,                         // [576] latent-first
                         const std::vector<const double*>& keys,  // N x [576] latent-first
                         const std::vector<bool>& visible, double sm_scale) {
  PlainRow out;
  out.o.assign(kLatentDim, 0.0);
  out.keys = static_cast<int64_t>(keys.size());
  std::vector<double> s(keys.size(), -kInf);
  double m = -kInf;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!visible[j]) continue;
    double dot = 0, mag = 0;
    for (int k = 0; k < kRowDim; ++k) {
      dot += q[k] * keys[j][k];
      mag += std::fabs(q[k] * keys[j][k]);
    }
    s[j] = sm_scale * dot;
    out.score_mag = std::max(out.score_mag, sm_scale * mag);
    m = std::max(m, s[j]);
  }
  if (m == -kInf) return out;
  double l = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!visible[j]) continue;
    double w = std::exp(s[j] - m);
    l += w;
    for (int k = 0; k < kLatentDim; ++k) out.o[k] += w * keys[j][k];
  }
  for (double& v : out.o) v /= l;
  out.lse = m + std::log(l);
  return out;
}

// Bounds for comparing two double computations of the same softmax whose scores differ by at most
// eps_s (both sides' score rounding together), over N keys:
//  * a weight exp(s_j - m) moves by a factor exp(+-2 eps_s) when s_j and m each move by eps_s,
//    plus 2u for the subtraction and exp (glibc's exp is within 1 ulp); the sum l adds gamma_N,
//    and the model's chunked rescaling (one multiply by alpha per 256 keys) at most another
//    gamma_N; so each side's p_j = w_j / l is within 4 eps_side + 2 gamma_N + 5u relative, and
//    both sides together within 4 eps_s + 4 gamma_N + 10u;
//  * o = sum_j p_j c_j then differs by that times max|c|, plus each side's accumulation gamma_N:
//    tol_o = (4 eps_s + 6 gamma_N + 10u) max|c|;
//  * lse = m + ln l: m moves eps_s, ln l moves by l's relative error (2 eps_s + 4 gamma_N + 4u
//    both sides), and the final log and add round by u (1 + |lse|) per side:
//    tol_lse = 3 eps_s + 4 gamma_N + 8u (1 + |lse|).
double tol_o(double eps_s, int64_t n, double max_c) {
  return (4 * eps_s + 6 * gamma(static_cast<double>(n)) + 10 * kU) * max_c;
}
double tol_lse(double eps_s, int64_t n, double lse) {
  return 3 * eps_s + 4 * gamma(static_cast<double>(n)) + 8 * kU * (1 + std::fabs(lse));
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Compares reference_verify on a stored batch with plain loops over each request's logical keys:
// `visible(request, t, n)` says whether draft query t sees key n of the [P + D] key list.
template <class Visible>
void expect_matches_plain(const Logical& L, const RefResult& r, Visible&& visible) {
  ASSERT_EQ(r.tokens, L.tokens());
  ASSERT_EQ(r.heads, L.heads);
  for (size_t i = 0; i < L.reqs.size(); ++i) {
    const int64_t P = L.reqs[i].prefix_len;
    const int32_t D = static_cast<int32_t>(L.reqs[i].parents.size());
    std::vector<const double*> keys;  // [P + D] rows of 576
    for (int64_t n = 0; n < P + D; ++n) keys.push_back(&L.keys[i][n * kRowDim]);
    double max_c = max_abs(L.keys[i]);
    for (int32_t t = 0; t < D; ++t) {
      std::vector<bool> vis(P + D);
      for (int64_t n = 0; n < P + D; ++n) vis[n] = visible(i, t, n);
      const int64_t token = L.q_begin(i) + t;
      for (int32_t h = 0; h < L.heads; ++h) {
        const double* q = &L.q[(static_cast<size_t>(token) * L.heads + h) * kRowDim];
        PlainRow want = plain_attention(q, keys, vis, static_cast<double>(L.sm_scale));
        // Each side's score is a 576-term dot product times sm_scale: gamma_577 of its magnitude.
        double eps_s = 2 * gamma(577) * want.score_mag;
        double tol = tol_o(eps_s, want.keys, max_c);
        if (want.lse == -kInf) {
          EXPECT_EQ(r.lse_at(token, h), -kInf) << "request " << i << " node " << t;
        } else {
          EXPECT_NEAR(r.lse_at(token, h), want.lse, tol_lse(eps_s, want.keys, want.lse))
              << "request " << i << " node " << t << " head " << h;
        }
        for (int k = 0; k < kLatentDim; ++k) {
          ASSERT_NEAR(r.o(token, h, k), want.o[k], tol)
              << "request " << i << " node " << t << " head " << h << " col " << k;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A case worked on paper.
// ---------------------------------------------------------------------------------------------

TEST(Attention, HandWorkedPrefixAndTree) {
  // One request, H = 1, sm_scale = 1, prefix of 2 keys (p0, p1), draft tree of 3 nodes where
  // nodes 1 and 2 are both children of the root 0. Visibility (prefix always visible):
  //   node 0 sees p0 p1 d0; node 1 sees p0 p1 d0 d1; node 2 sees p0 p1 d0 d2.
  // Every query is q_lat = (lam, 0, ...), q_pe = (lam, 0, ...) with lam = float(ln 2), stored as
  // fp32 (ln 2 itself is not a float). A key's score is lam * (c[0] + k_pe[0]):
  //   key   c[0] k_pe[0]  score  weight (w = e^lam ~ 2)   c[1] (the value we follow)
  //   p0     0     0       0      1                          1
  //   p1     1     0       lam    w                          2
  //   d0     0     1       lam    w                          4
  //   d1     1     1       2 lam  w^2                       -1
  //   d2     0     0       0      1                          8
  // o[0] is the weighted mean of c[0], o[1] that of c[1], every other column is 0 (all c are).
  //   node 0: S = 1 + 2w        = 5;  o[0] = w / S         = 2/5; o[1] = (1 + 2w + 4w) / S = 13/5
  //   node 1: S = 1 + 2w + w^2  = 9;  o[0] = (w + w^2) / S = 6/9; o[1] = (1 + 6w - w^2) / S = 9/9
  //   node 2: S = 2 + 2w        = 6;  o[0] = w / S         = 2/6; o[1] = (9 + 6w) / S      = 21/6
  //   lse = ln S: ln 5, ln 9, ln 6.
  Logical L;
  L.heads = 1;
  L.sm_scale = 1.0f;
  L.reqs = {{{-1, 0, 0}, 2}};
  const double lam = static_cast<double>(static_cast<float>(std::log(2.0)));
  L.q.assign(3 * kRowDim, 0.0);
  for (int t = 0; t < 3; ++t) {
    L.q[t * kRowDim + 0] = lam;
    L.q[t * kRowDim + kLatentDim] = lam;
  }
  const double c0[5] = {0, 1, 0, 1, 0}, pe0[5] = {0, 0, 1, 1, 0}, c1[5] = {1, 2, 4, -1, 8};
  L.keys.assign(1, std::vector<double>(5 * kRowDim, 0.0));
  for (int n = 0; n < 5; ++n) {
    L.keys[0][n * kRowDim + 0] = c0[n];
    L.keys[0][n * kRowDim + 1] = c1[n];
    L.keys[0][n * kRowDim + kLatentDim] = pe0[n];
  }
  StoreOptions opt;
  opt.q_dtype = DType::F32;
  Stored st(L, opt);
  RefResult r = reference_verify(st.params());

  const double w = std::exp(lam);
  const double S[3] = {1 + 2 * w, 1 + 2 * w + w * w, 2 + 2 * w};
  const double o0[3] = {w / S[0], (w + w * w) / S[1], w / S[2]};
  const double o1[3] = {(1 + 6 * w) / S[0], (1 + 6 * w - w * w) / S[1], (9 + 6 * w) / S[2]};
  const double paper_o0[3] = {2.0 / 5, 6.0 / 9, 2.0 / 6};
  const double paper_o1[3] = {13.0 / 5, 1.0, 21.0 / 6};
  const double paper_S[3] = {5, 9, 6};
  for (int t = 0; t < 3; ++t) {
    // Both sides are a handful of double operations on values below 10: a few ulp of 10 is
    // ~1e-14, so 1e-12 is a bound with room, not a loosened one.
    EXPECT_NEAR(r.o(t, 0, 0), o0[t], 1e-12) << t;
    EXPECT_NEAR(r.o(t, 0, 1), o1[t], 1e-12) << t;
    EXPECT_NEAR(r.lse_at(t, 0), std::log(S[t]), 1e-12) << t;
    for (int k = 2; k < kLatentDim; ++k) EXPECT_EQ(r.o(t, 0, k), 0.0) << t << " " << k;
    // The paper values use w = 2 exactly. lam = ln 2 + delta with |delta| <= 2^-25 (half a float
    // ulp in [0.5, 1)), so w = 2 e^delta and each weight w^k has relative error <= 2|delta|
    // (~6e-8); a ratio of two such sums moves by <= 2 * 6e-8 relative, times |o| <= 3.5: < 1e-6.
    EXPECT_NEAR(r.o(t, 0, 0), paper_o0[t], 1e-6) << t;
    EXPECT_NEAR(r.o(t, 0, 1), paper_o1[t], 1e-6) << t;
    EXPECT_NEAR(r.lse_at(t, 0), std::log(paper_S[t]), 1e-6) << t;
  }
}

// ---------------------------------------------------------------------------------------------
// Laws against independent plain loops.
// ---------------------------------------------------------------------------------------------

TEST(Attention, ChainEqualsBottomRightCausal) {
  // A chain of D draft nodes is causal attention over the P + D keys with the bottom-right rule:
  // query i sees key j iff j <= P + i. P = 300 crosses the model's 256-key chunk edge; P = 0 and
  // P = 1 are the edge cases of docs/spec.md §7 class 8.
  Logical L = random_logical(
      {{chain_parents(4), 300}, {chain_parents(1), 0}, {chain_parents(5), 1}}, 2, 11);
  L.sm_scale = static_cast<float>(0.1352338);
  Stored st(L, {});
  RefResult r = reference_verify(st.params());
  expect_matches_plain(L, r, [&](size_t i, int32_t t, int64_t n) {
    return n <= L.reqs[i].prefix_len + t;  // key n of the [P + D] list: n <= P + i
  });
}

TEST(Attention, RandomTreesMatchPlainLoops) {
  std::mt19937_64 rng(5);
  Logical L = random_logical({{random_parents(rng, 7), 257},
                              {random_parents(rng, 1), 3},
                              {random_parents(rng, 16), 0},
                              {random_parents(rng, 9), 64}},
                             3, 12);
  L.sm_scale = static_cast<float>(0.1308608);
  StoreOptions opt;
  opt.draft = DraftKvSource::CacheSlots;
  Stored st(L, opt);
  RefResult r = reference_verify(st.params());
  expect_matches_plain(L, r, [&](size_t i, int32_t t, int64_t n) {
    const int64_t P = L.reqs[i].prefix_len;
    return n < P || tree_visible(L.reqs[i].parents, t, static_cast<int32_t>(n - P));
  });
}

TEST(Attention, Fp32StorageIsReadAtFullPrecision) {
  // Values with full 24-bit mantissas, stored as fp32 in the pool, k_extend and q: the model must
  // read them as they are (a bf16 rounding anywhere would move o by ~2^-9 relative, far outside
  // the plain-loop bound of ~1e-13).
  std::mt19937_64 rng(17);
  Logical L = random_logical({{random_parents(rng, 5), 33}, {random_parents(rng, 4), 0}}, 2, 18);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (double& v : L.q) v = static_cast<double>(static_cast<float>(nd(rng)));
  for (auto& keys : L.keys) {
    for (double& v : keys) v = static_cast<double>(static_cast<float>(nd(rng)));
  }
  StoreOptions opt;
  opt.kv_dtype = DType::F32;
  opt.q_dtype = DType::F32;
  Stored st(L, opt);
  RefResult r = reference_verify(st.params());
  expect_matches_plain(L, r, [&](size_t i, int32_t t, int64_t n) {
    const int64_t P = L.reqs[i].prefix_len;
    return n < P || tree_visible(L.reqs[i].parents, t, static_cast<int32_t>(n - P));
  });
}

TEST(Attention, FullyMaskedRowIsZeroWithLseMinusInf) {
  // Request 0 has no prefix; its mask row for node 1 is cleared entirely (a mask no tree makes,
  // but validate_mask only checks bounds), so node 1 sees no key at all: o = 0, lse = -inf, and
  // no NaN from -inf - -inf. The other rows are unaffected.
  Logical L = random_logical({{{-1, 0, 1}, 0}, {{-1, 0}, 2}}, 2, 13);
  Stored st(L, {});
  const int64_t row1 = 1 * 3;  // request 0: [D=3, P+D=3], row 1 starts at element 3
  for (int c = 0; c < 3; ++c) st.mask[row1 + c] = 0;
  VerifyParams p = st.params();
  RefResult r = reference_verify(p);
  for (int32_t h = 0; h < 2; ++h) {
    EXPECT_EQ(r.lse_at(1, h), -kInf);
    for (int k = 0; k < kLatentDim; ++k) ASSERT_EQ(r.o(1, h, k), 0.0);
  }
  expect_matches_plain(L, r, [&](size_t i, int32_t t, int64_t n) {
    if (i == 0 && t == 1) return false;  // P = 0 there: no key at all
    const int64_t P = L.reqs[i].prefix_len;
    return n < P || tree_visible(L.reqs[i].parents, t, static_cast<int32_t>(n - P));
  });
  // Base 2 keeps -inf, and the backend writes zeros and -inf (not NaN) into the outputs.
  EXPECT_EQ(reference_verify(p, LseBase::Base2).lse_at(1, 0), -kInf);
  ModelBackend backend;
  backend.run(p);
  for (int32_t h = 0; h < 2; ++h) {
    EXPECT_EQ(st.lse_at(1, h), -std::numeric_limits<float>::infinity());
    for (int k = 0; k < kLatentDim; ++k) ASSERT_EQ(st.o_at(1, h, k), 0.0);
    EXPECT_TRUE(std::isfinite(st.lse_at(0, h)));
  }
}

TEST(Attention, LseBase2IsNaturalOverLn2) {
  std::mt19937_64 rng(3);
  Logical L = random_logical({{random_parents(rng, 6), 20}, {random_parents(rng, 3), 0}}, 2, 14);
  Stored st(L, {});
  VerifyParams p = st.params();
  RefResult nat = reference_verify(p, LseBase::Natural);
  RefResult two = reference_verify(p, LseBase::Base2);
  EXPECT_EQ(two.o_lat, nat.o_lat);  // the base changes only the reported lse
  for (int32_t i = 0; i < p.batch_size; ++i) {
    std::vector<double> s = reference_scores(p, i);  // [D, H, P + D]
    const int64_t D = static_cast<int64_t>(L.reqs[i].parents.size());
    const int64_t N = L.reqs[i].prefix_len + D;
    for (int64_t t = 0; t < D; ++t) {
      for (int32_t h = 0; h < L.heads; ++h) {
        // log2 sum 2^(s_j / ln 2), max-subtracted, from the scores alone.
        const double* row = &s[(t * L.heads + h) * N];
        double m2 = -kInf;
        for (int64_t j = 0; j < N; ++j) m2 = std::max(m2, row[j] / std::log(2.0));
        double sum = 0;
        for (int64_t j = 0; j < N; ++j) sum += std::exp2(row[j] / std::log(2.0) - m2);
        double want = m2 + std::log2(sum);
        int64_t token = L.q_begin(i) + t;
        // Same scores on both sides; what differs is the base-2 route: a divide and exp2 per
        // term (3u), the sum (gamma_N), the log and add (2u (1 + |lse|)), against the natural
        // route's own (same) budget: 2 (gamma_N + 5u (1 + |lse|)) covers both.
        double tol = 2 * (gamma(static_cast<double>(N)) + 5 * kU * (1 + std::fabs(want)));
        EXPECT_NEAR(two.lse_at(token, h), want, tol);
        EXPECT_NEAR(two.lse_at(token, h), nat.lse_at(token, h) / std::log(2.0),
                    4 * kU * (1 + std::fabs(want)));
      }
    }
  }
}

TEST(Attention, ScoresAreMaskedWhereTheTreeHides) {
  std::mt19937_64 rng(4);
  Logical L = random_logical({{random_parents(rng, 8), 5}}, 2, 15);
  Stored st(L, {});
  VerifyParams p = st.params();
  std::vector<double> s = reference_scores(p, 0);  // [D, H, P + D]
  const int32_t D = 8;
  const int64_t P = 5, N = P + D;
  ASSERT_EQ(s.size(), static_cast<size_t>(D * 2 * N));
  RefResult r = reference_verify(p);
  for (int32_t t = 0; t < D; ++t) {
    for (int32_t h = 0; h < 2; ++h) {
      for (int64_t n = 0; n < N; ++n) {
        bool vis = n < P || tree_visible(L.reqs[0].parents, t, static_cast<int32_t>(n - P));
        double v = s[(t * 2 + h) * N + n];
        if (!vis) {
          EXPECT_EQ(v, -kInf) << t << " " << n;
          continue;
        }
        // Plain 576-term dot: both sides within gamma_577 of sm_scale * sum |q k|.
        double dot = 0, mag = 0;
        for (int k = 0; k < kRowDim; ++k) {
          double term = L.q_at(t, h, k) * L.keys[0][n * kRowDim + k];
          dot += term;
          mag += std::fabs(term);
        }
        EXPECT_NEAR(v, L.sm_scale * dot, 2 * gamma(577) * L.sm_scale * mag);
      }
    }
  }
  try {
    reference_scores(p, 1);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "request");
    EXPECT_EQ(e.index(), 1);
  }
  EXPECT_THROW(reference_scores(p, -1), InvalidInput);
  (void)r;
}

// ---------------------------------------------------------------------------------------------
// Absorbed == non-absorbed (docs/spec.md §1).
// ---------------------------------------------------------------------------------------------

TEST(Attention, AbsorbedEqualsNonAbsorbed) {
  const int32_t H = 2;
  std::mt19937_64 rng(21);
  Logical L = random_logical(
      {{random_parents(rng, 5), 7}, {random_parents(rng, 3), 0}, {chain_parents(2), 40}}, H, 22,
      0.5);
  L.sm_scale = static_cast<float>(0.1352338);
  const int64_t T = L.tokens();
  // Dyadic q_nope (multiples of 1/8 in [-1, 1]) and W_kc (multiples of 1/16 in [-1/2, 1/2]) make
  // q_lat = q_nope @ W_kc a multiple of 1/128 below 2^13 in magnitude: exact in fp32, so the
  // stored query is exactly the absorbed one and the two forms compute the same real numbers.
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<double> q_nope(static_cast<size_t>(T) * H * kNopeDim);  // [T, H, 128]
  for (double& v : q_nope) v = small(rng) / 8.0;
  std::vector<double> w_kc(static_cast<size_t>(H) * kNopeDim * kLatentDim);  // [H, 128, 512]
  for (double& v : w_kc) v = small(rng) / 16.0;
  std::vector<double> w_vc(static_cast<size_t>(H) * kLatentDim * kVHeadDim);  // [H, 512, 128]
  std::normal_distribution<double> nd(0.0, 1.0 / std::sqrt(512.0));
  for (double& v : w_vc) v = nd(rng);
  std::vector<double> q_lat = absorb_query(q_nope, w_kc, H);  // [T, H, 512]
  ASSERT_EQ(q_lat.size(), static_cast<size_t>(T) * H * kLatentDim);
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t h = 0; h < H; ++h) {
      for (int k = 0; k < kLatentDim; ++k) {
        // absorb_query against a plain loop; exact because every partial sum is a small dyadic.
        double want = 0;
        for (int i = 0; i < kNopeDim; ++i) {
          want += q_nope[(t * H + h) * kNopeDim + i] * w_kc[(h * kNopeDim + i) * kLatentDim + k];
        }
        double got = q_lat[(t * H + h) * kLatentDim + k];
        ASSERT_EQ(got, want);
        ASSERT_EQ(static_cast<double>(static_cast<float>(got)), got);
        L.q[(t * H + h) * kRowDim + k] = got;
      }
    }
  }
  StoreOptions opt;
  opt.q_dtype = DType::F32;
  Stored st(L, opt);
  VerifyParams p = st.params();
  RefResult abs = reference_verify(p);
  std::vector<double> o_full;
  RefResult non = nonabsorbed_verify(p, q_nope, w_kc, w_vc, &o_full);
  ASSERT_EQ(o_full.size(), static_cast<size_t>(T) * H * kVHeadDim);

  for (size_t i = 0; i < L.reqs.size(); ++i) {
    const int64_t P = L.reqs[i].prefix_len;
    const int32_t D = static_cast<int32_t>(L.reqs[i].parents.size());
    const int64_t N = P + D;
    const std::vector<double>& keys = L.keys[i];  // [N, 576]
    // Scores. The absorbed score is a 576-term dot (gamma_577 with sm_scale) of terms bounded by
    // M = sum_i |q_nope_i| sum_k |W_ik c_k| + sum |q_pe k_pe|, since |q_lat_k| <= sum_i |q_nope_i
    // W_ik|. The non-absorbed one nests a 512-term sum (k_nope) in a 128-term sum, plus 64 rope
    // terms, the add and the scale: within gamma_700 of M. So |s_abs - s_non| <= (gamma_577 +
    // gamma_700) sm_scale M.
    std::vector<double> s_abs = reference_scores(p, static_cast<int32_t>(i));
    std::vector<double> s_non = nonabsorbed_scores(p, static_cast<int32_t>(i), q_nope, w_kc);
    ASSERT_EQ(s_abs.size(), s_non.size());
    double eps_max = 0;
    for (int32_t t = 0; t < D; ++t) {
      const int64_t token = L.q_begin(i) + t;
      for (int32_t h = 0; h < H; ++h) {
        for (int64_t n = 0; n < N; ++n) {
          double M = 0;
          for (int a = 0; a < kNopeDim; ++a) {
            double inner = 0;
            for (int k = 0; k < kLatentDim; ++k) {
              inner += std::fabs(w_kc[(h * kNopeDim + a) * kLatentDim + k] * keys[n * kRowDim + k]);
            }
            M += std::fabs(q_nope[(token * H + h) * kNopeDim + a]) * inner;
          }
          for (int k = 0; k < kRopeDim; ++k) {
            M += std::fabs(L.q_at(token, h, kLatentDim + k) * keys[n * kRowDim + kLatentDim + k]);
          }
          double eps = (gamma(577) + gamma(700)) * L.sm_scale * M;
          eps_max = std::max(eps_max, eps);
          size_t at = (static_cast<size_t>(t) * H + h) * N + n;
          if (s_abs[at] == -kInf) {
            EXPECT_EQ(s_non[at], -kInf);
          } else {
            ASSERT_NEAR(s_abs[at], s_non[at], eps) << i << " " << t << " " << h << " " << n;
          }
        }
      }
    }
    // Outputs and lse, by the softmax bounds above (tol_o, tol_lse) with eps_s = eps_max.
    double max_c = 0;
    for (int64_t n = 0; n < N; ++n) {
      for (int k = 0; k < kLatentDim; ++k)
        max_c = std::max(max_c, std::fabs(keys[n * kRowDim + k]));
    }
    // o_full against o_lat @ W_vc[h]: the same real number sum_n sum_k p_n c_nk W_kj / l summed
    // in two orders from the same p_n; each side within (2 gamma_N + gamma_512 + 4u) of
    // A = max_{n, j} sum_k |c_nk W_kj| (p sums to 1).
    std::vector<double> A(H, 0.0);
    for (int32_t h = 0; h < H; ++h) {
      for (int64_t n = 0; n < N; ++n) {
        for (int j = 0; j < kVHeadDim; ++j) {
          double a = 0;
          for (int k = 0; k < kLatentDim; ++k) {
            a += std::fabs(keys[n * kRowDim + k] * w_vc[(h * kLatentDim + k) * kVHeadDim + j]);
          }
          A[h] = std::max(A[h], a);
        }
      }
    }
    const double to = tol_o(eps_max, N, max_c);
    for (int32_t t = 0; t < D; ++t) {
      const int64_t token = L.q_begin(i) + t;
      for (int32_t h = 0; h < H; ++h) {
        EXPECT_NEAR(abs.lse_at(token, h), non.lse_at(token, h),
                    tol_lse(eps_max, N, abs.lse_at(token, h)));
        for (int k = 0; k < kLatentDim; ++k) {
          ASSERT_NEAR(abs.o(token, h, k), non.o(token, h, k), to) << i << " " << t << " " << k;
        }
        const double tf = 2 * (2 * gamma(static_cast<double>(N)) + gamma(512) + 4 * kU) * A[h];
        for (int j = 0; j < kVHeadDim; ++j) {
          double want = 0;
          for (int k = 0; k < kLatentDim; ++k) {
            want += non.o(token, h, k) * w_vc[(h * kLatentDim + k) * kVHeadDim + j];
          }
          ASSERT_NEAR(o_full[(token * H + h) * kVHeadDim + j], want, tf)
              << i << " " << t << " " << j;
        }
        // Measured on these seeds: scores, o_lat and lse agree exactly (the dyadic q_nope and
        // W_kc times bf16 c leave every partial sum exact in double), and o_full is within
        // ~2e-15 of o_lat @ W_vc, i.e. ~2e-16 relative to A. The asserted bounds are the worst
        // case: ~1e-13 of A for o_full, while Higham's worst case for o_lat (3e-10 of max|c|
        // here) is far looser than any rounding that actually happens.
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Storage layouts and draft sources: the same logical data, the same answer, bit for bit.
// ---------------------------------------------------------------------------------------------

TEST(Attention, EveryLayoutAndDraftSourceGivesIdenticalOutputs) {
  std::mt19937_64 rng(31);
  Logical L = random_logical(
      {{random_parents(rng, 6), 70}, {random_parents(rng, 2), 1}, {random_parents(rng, 4), 0}}, 2,
      32);
  Stored base_st(L, {});
  RefResult base = reference_verify(base_st.params());
  for (double v : base.o_lat) ASSERT_TRUE(std::isfinite(v));  // no poisoned slot was read
  // The model reads each stored value into the same double and runs the same operations in the
  // same order whatever the addressing, so the results must be identical, not merely close.
  for (PoolForm form :
       {PoolForm::LatentFirst, PoolForm::Padded640, PoolForm::Split, PoolForm::RopeFirst}) {
    for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      for (DType kv : {DType::BF16, DType::F32}) {
        for (bool q_rope_first : {false, true}) {
          StoreOptions opt;
          opt.pool = form;
          opt.draft = src;
          opt.kv_dtype = kv;
          opt.q_dtype = q_rope_first ? DType::F32 : DType::BF16;
          opt.q_rope_first = q_rope_first;
          opt.q_head_pad = q_rope_first ? 8 : 0;
          opt.slot_seed = 100 + static_cast<uint64_t>(form);
          Stored st(L, opt);
          RefResult r = reference_verify(st.params());
          SCOPED_TRACE(::testing::Message()
                       << "form " << static_cast<int>(form) << " source " << static_cast<int>(src)
                       << " kv " << static_cast<int>(kv) << " q_rope_first " << q_rope_first);
          EXPECT_EQ(r.o_lat, base.o_lat);
          EXPECT_EQ(r.lse, base.lse);
        }
      }
    }
  }
}

TEST(Attention, LatentFirstPoolReadAsRopeFirstDiffers) {
  // docs/spec.md §7 class 2: reading [c | k_pe] rows as [k_pe | c] takes c from columns 64..575 and
  // k_pe from 0..63: a different, unrelated set of values, so the outputs change at O(1) relative.
  std::mt19937_64 rng(41);
  Logical L = random_logical({{random_parents(rng, 5), 30}}, 2, 42);
  StoreOptions opt;
  opt.draft = DraftKvSource::CacheSlots;  // every key through the layout
  Stored st(L, opt);
  VerifyParams p = st.params();
  RefResult good = reference_verify(p);
  p.kv_layout = KvLayout::rope_first();
  RefResult bad = reference_verify(p);
  double diff = 0, norm = 0;
  for (size_t k = 0; k < good.o_lat.size(); ++k) {
    diff += (good.o_lat[k] - bad.o_lat[k]) * (good.o_lat[k] - bad.o_lat[k]);
    norm += good.o_lat[k] * good.o_lat[k];
  }
  EXPECT_GT(std::sqrt(diff / norm), 0.1);
}

TEST(Attention, GraphPaddingChangesNoRealRowBit) {
  // docs/spec.md §3: CUDA-graph padding appends rows (P = 1, slot 0, stale garbage mask bytes) that
  // must not change a real row's output by a single bit. The builder (model/batch.h) holds the same
  // logical data for the real requests whatever the padding, so the real rows must be identical.
  std::mt19937_64 rng(91);
  BatchSpec spec;
  spec.num_heads = 4;
  spec.seed = 92;
  spec.requests = {{DraftTree::from_parents(random_parents(rng, 6)), 40},
                   {DraftTree::chain(3), 0},
                   {DraftTree::from_parents(random_parents(rng, 5)), 1}};
  VerifyBatch plain = VerifyBatch::build(spec);
  spec.graph_padded_bs = 8;
  VerifyBatch padded = VerifyBatch::build(spec);
  ASSERT_EQ(padded.batch_size(), 8);
  RefResult a = reference_verify(plain.params());
  RefResult b = reference_verify(padded.params());
  const int64_t real = plain.real_tokens();
  ASSERT_EQ(padded.real_tokens(), real);
  ASSERT_GT(b.tokens, real);
  const size_t n_o = static_cast<size_t>(real) * spec.num_heads * kLatentDim;
  const size_t n_l = static_cast<size_t>(real) * spec.num_heads;
  EXPECT_TRUE(std::equal(a.o_lat.begin(), a.o_lat.begin() + n_o, b.o_lat.begin()));
  EXPECT_TRUE(std::equal(a.lse.begin(), a.lse.begin() + n_l, b.lse.begin()));
  for (size_t k = 0; k < n_o; ++k) ASSERT_TRUE(std::isfinite(a.o_lat[k]));
}

// ---------------------------------------------------------------------------------------------
// ModelBackend.
// ---------------------------------------------------------------------------------------------

TEST(ModelBackend, WritesOutputsRoundedOnceWithStrides) {
  std::mt19937_64 rng(51);
  Logical L = random_logical({{random_parents(rng, 5), 12}, {random_parents(rng, 3), 0}}, 3, 52);
  for (DType od : {DType::BF16, DType::F32}) {
    StoreOptions opt;
    opt.o_dtype = od;
    opt.o_head_pad = 16;
    opt.spare_rows = 2;
    Stored st(L, opt);
    VerifyParams p = st.params();
    ModelBackend backend;
    EXPECT_EQ(backend.name(), "model");
    EXPECT_TRUE(backend.can_implement(p));
    EXPECT_EQ(backend.workspace_bytes(p), 0u);
    backend.run(p);
    RefResult r = reference_verify(p);
    for (int64_t t = 0; t < r.tokens; ++t) {
      for (int32_t h = 0; h < r.heads; ++h) {
        for (int k = 0; k < kLatentDim; ++k) {
          // One rounding, to nearest even: the stored value is exactly the rounded reference.
          double want = od == DType::BF16
                            ? static_cast<double>(bf16_to_float(double_to_bf16(r.o(t, h, k))))
                            : static_cast<double>(static_cast<float>(r.o(t, h, k)));
          ASSERT_EQ(st.o_at(t, h, k), want) << t << " " << h << " " << k;
        }
        EXPECT_EQ(st.lse_at(t, h), static_cast<float>(r.lse_at(t, h)));
      }
    }
    // The 16 padding elements after every head row, and the two spare token rows past T
    // (max_total_q = T + 2), are untouched: sentinel bytes 0x5a in o, NaN in lse.
    const uint8_t* raw = reinterpret_cast<const uint8_t*>(st.raw_o().data());
    const int64_t bytes = dtype_bytes(od);
    const int64_t head_rows = r.tokens * r.heads;
    for (int64_t row = 0; row < (r.tokens + 2) * r.heads; ++row) {
      for (int64_t k = row < head_rows ? kLatentDim : 0; k < kLatentDim + 16; ++k) {
        for (int64_t b = 0; b < bytes; ++b) {
          ASSERT_EQ(raw[(row * (kLatentDim + 16) + k) * bytes + b], 0x5a) << row << " " << k;
        }
      }
    }
    for (int64_t t = r.tokens; t < r.tokens + 2; ++t) {
      for (int32_t h = 0; h < r.heads; ++h) EXPECT_TRUE(std::isnan(st.lse_at(t, h)));
    }
  }
}

TEST(ModelBackend, RejectsMalformedParams) {
  Logical L = random_logical({{{-1, 0}, 3}}, 1, 61);
  Stored st(L, {});
  st.kv_indices()[2] = 1 << 20;  // a slot far outside the pool
  VerifyParams p = st.params();
  ModelBackend backend;
  Support s = backend.can_implement(p);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("kv_indices"), std::string::npos) << s.reason;
  try {
    backend.run(p);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "kv_indices");
    EXPECT_EQ(e.index(), 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input to the reference functions: each raises InvalidInput naming the field.
// ---------------------------------------------------------------------------------------------

TEST(AttentionErrors, ReferenceValidatesParams) {
  Logical L = random_logical({{{-1, 0}, 3}}, 1, 71);
  Stored st(L, {});
  VerifyParams p = st.params();
  p.q = nullptr;
  expect_invalid([&] { reference_verify(p); }, "q", -1);
  p = st.params();
  st.kv_indices()[0] = -1;
  expect_invalid([&] { reference_verify(p); }, "kv_indices", 0);
  expect_invalid([&] { reference_scores(p, 0); }, "kv_indices", 0);
}

TEST(AttentionErrors, AbsorbQueryChecksSizes) {
  std::vector<double> w_kc(2 * kNopeDim * kLatentDim, 0.0);
  std::vector<double> q_nope(3 * 2 * kNopeDim, 0.0);
  expect_invalid([&] { absorb_query(q_nope, w_kc, 0); }, "heads", -1);
  expect_invalid([&] { absorb_query(q_nope, w_kc, 1); }, "w_kc", -1);
  std::vector<double> ragged(2 * kNopeDim + 1, 0.0);
  expect_invalid([&] { absorb_query(ragged, w_kc, 2); }, "q_nope", -1);
  EXPECT_EQ(absorb_query(q_nope, w_kc, 2).size(), static_cast<size_t>(3 * 2 * kLatentDim));
}

TEST(AttentionErrors, NonAbsorbedChecksSizes) {
  const int32_t H = 2;
  Logical L = random_logical({{{-1, 0, 0}, 2}}, H, 81);
  Stored st(L, {});
  VerifyParams p = st.params();
  const int64_t T = 3;
  std::vector<double> q_nope(T * H * kNopeDim, 0.0), w_kc(H * kNopeDim * kLatentDim, 0.0),
      w_vc(H * kLatentDim * kVHeadDim, 0.0), out;
  std::vector<double> short_q(q_nope.size() - 1), short_kc(w_kc.size() - 1),
      short_vc(w_vc.size() + 1);
  expect_invalid([&] { nonabsorbed_verify(p, short_q, w_kc, w_vc, &out); }, "q_nope", -1);
  expect_invalid([&] { nonabsorbed_verify(p, q_nope, short_kc, w_vc, &out); }, "w_kc", -1);
  expect_invalid([&] { nonabsorbed_verify(p, q_nope, w_kc, short_vc, &out); }, "w_vc", -1);
  expect_invalid([&] { nonabsorbed_scores(p, 0, short_q, w_kc); }, "q_nope", -1);
  expect_invalid([&] { nonabsorbed_scores(p, 3, q_nope, w_kc); }, "request", 3);
  // Well-formed sizes with a null o_full run (the 128-wide output is optional).
  RefResult r = nonabsorbed_verify(p, q_nope, w_kc, w_vc, nullptr);
  EXPECT_EQ(r.tokens, T);
}

}  // namespace
}  // namespace mlaverify::model

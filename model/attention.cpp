// The reference verify attention in double (absorbed and non-absorbed forms), read from the very
// buffers a kernel reads. Exactness over speed: Eigen GEMMs per request, one thread.
#include "model/attention.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "mlaverify/error.h"
#include "model/bitrows.h"
#include "model/mask.h"
#include "model/storage.h"
#include "model/validate.h"

namespace mlaverify::model {
namespace {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Keys per chunk of the online softmax. Any size gives the same result up to double rounding;
// 256 keeps a chunk's c [256, 512] at 1 MiB however long the prefix is.
constexpr int64_t kKeyChunk = 256;

// Inside one request the query rows are ordered head-major, r = h * D + t, so the rows of one
// head form a contiguous block (the non-absorbed form multiplies each head by its own weights).
int64_t row_of(int32_t head, int32_t node, int32_t draft_nodes) {
  return static_cast<int64_t>(head) * draft_nodes + node;
}

// The q_lat [D * H, 512] and q_pe [D * H, 64] rows of one request, as stored in p.q.
void load_queries(const VerifyParams& p, const RequestExtent& e, RowMat& q_lat, RowMat& q_pe) {
  const int32_t D = e.draft_nodes, H = p.num_heads;
  q_lat.resize(static_cast<int64_t>(D) * H, kLatentDim);  // [D * H, 512]
  q_pe.resize(static_cast<int64_t>(D) * H, kRopeDim);     // [D * H, 64]
  for (int32_t h = 0; h < H; ++h) {
    for (int32_t t = 0; t < D; ++t) {
      int64_t row = (e.q_begin + t) * p.q_token_stride + h * p.q_head_stride;
      int64_t r = row_of(h, t, D);
      // Row-major matrices: row r is contiguous.
      load_row(p.q_dtype, p.q, row + p.q_latent_offset, kLatentDim, q_lat.row(r).data());
      load_row(p.q_dtype, p.q, row + p.q_rope_offset, kRopeDim, q_pe.row(r).data());
    }
  }
}

// Where key n of a request lives: n < P is prefix key n (slot kv_slot(p, e, n)); n >= P is draft
// node n - P, from k_extend row q_begin + (n - P) (latent-first) or, on the CacheSlots path, from
// slot kv_slot(p, e, n) (the last D_i entries of the request's kv range).
struct KeyPlace {
  const void* base;
  int64_t latent;  // element index of c (512)
  int64_t rope;    // element index of k_pe (64)
};

KeyPlace key_place(const VerifyParams& p, const RequestExtent& e, int64_t n) {
  if (n < e.prefix_len || p.draft_source == DraftKvSource::CacheSlots) {
    const int64_t slot = kv_slot(p, e, n);
    return {p.kv_pool, p.kv_layout.latent_index(slot), p.kv_layout.rope_index(slot)};
  }
  const int64_t latent = (e.q_begin + (n - e.prefix_len)) * p.k_extend_stride;
  return {p.k_extend, latent, latent + kLatentDim};
}

// Keys [n0, n1) of one request (key_place), as c [K, 512] and k_pe [K, 64].
void load_keys(const VerifyParams& p, const RequestExtent& e, int64_t n0, int64_t n1, RowMat& c,
               RowMat& k_pe) {
  c.resize(n1 - n0, kLatentDim);   // [K, 512]
  k_pe.resize(n1 - n0, kRopeDim);  // [K, 64]
  for (int64_t n = n0; n < n1; ++n) {
    const KeyPlace at = key_place(p, e, n);
    load_row(p.kv_dtype, at.base, at.latent, kLatentDim, c.row(n - n0).data());
    load_row(p.kv_dtype, at.base, at.rope, kRopeDim, k_pe.row(n - n0).data());
  }
}

// Sets s[r, n - n0] = -inf where draft query t may not see draft key n - P. Prefix keys are
// visible to every draft query (docs/spec.md §2); FULL_MASK's prefix columns are not read, as in
// SGLang.
void apply_mask(const BitRows& block, const RequestExtent& e, int32_t heads, int64_t n0, int64_t n1,
                RowMat& s) {
  const int32_t D = e.draft_nodes;
  for (int64_t n = std::max(n0, e.prefix_len); n < n1; ++n) {
    int32_t j = static_cast<int32_t>(n - e.prefix_len);
    for (int32_t t = 0; t < D; ++t) {
      if (block.test(t, j)) continue;
      for (int32_t h = 0; h < heads; ++h) s(row_of(h, t, D), n - n0) = kNegInf;
    }
  }
}

// Max-subtracted softmax over key chunks, in double. Per row: m = running max of the scores seen,
// l = sum exp(s - m). Each chunk turns its scores into exp(s - m_new) and reports the factor
// alpha = exp(m_old - m_new) <= 1 by which the caller rescales its accumulators. In double the
// rescaling costs a few ulp per chunk (~1e-16 relative), far below anything a bf16 kernel shows.
class OnlineSoftmax {
 public:
  explicit OnlineSoftmax(int64_t rows)
      : m_(Eigen::VectorXd::Constant(rows, kNegInf)), l_(Eigen::VectorXd::Zero(rows)) {}

  // s [rows, K]: scores with masked entries -inf -> probabilities relative to the new max.
  Eigen::VectorXd step(RowMat& s) {
    Eigen::VectorXd alpha(s.rows());  // [rows]
    for (int64_t r = 0; r < s.rows(); ++r) {
      double m_new = std::max(m_(r), s.row(r).maxCoeff());
      if (m_new == kNegInf) {
        // Nothing visible yet in this row: keep l = 0 and the accumulators at zero. Skipping here
        // is what keeps -inf - -inf (NaN) from ever being formed.
        alpha(r) = 1.0;
        s.row(r).setZero();
        continue;
      }
      // m_new is finite: m_ - m_new is -inf (first visible key; exp gives 0) or <= 0.
      alpha(r) = std::exp(m_(r) - m_new);
      s.row(r) = (s.row(r).array() - m_new).exp();  // masked: exp(-inf) = 0 exactly
      l_(r) = l_(r) * alpha(r) + s.row(r).sum();
      m_(r) = m_new;
    }
    return alpha;
  }

  bool any_visible(int64_t r) const { return l_(r) > 0.0; }
  double sum(int64_t r) const { return l_(r); }
  // ln sum exp(s) = m + ln l; -inf for a row that saw no visible key.
  double lse(int64_t r) const { return any_visible(r) ? m_(r) + std::log(l_(r)) : kNegInf; }

 private:
  Eigen::VectorXd m_;  // [rows]
  Eigen::VectorXd l_;  // [rows]
};

// Walks the P_i + D_i keys of a request in chunks: visit(n0, n1, c [K, 512], k_pe [K, 64]).
template <class Visit>
void for_each_key_chunk(const VerifyParams& p, const RequestExtent& e, Visit&& visit) {
  const int64_t keys = e.prefix_len + e.draft_nodes;
  RowMat c, k_pe;
  for (int64_t n0 = 0; n0 < keys; n0 += kKeyChunk) {
    int64_t n1 = std::min(keys, n0 + kKeyChunk);
    load_keys(p, e, n0, n1, c, k_pe);
    visit(n0, n1, c, k_pe);
  }
}

// Writes a request's finished rows into the result: o = acc / l, lse = m + ln l (or -inf, 0).
void finish_rows(const RequestExtent& e, int32_t heads, const OnlineSoftmax& sm, const RowMat& acc,
                 int width, std::vector<double>& out, std::vector<double>* lse) {
  const int32_t D = e.draft_nodes;
  for (int32_t h = 0; h < heads; ++h) {
    for (int32_t t = 0; t < D; ++t) {
      int64_t r = row_of(h, t, D);
      size_t at = (static_cast<size_t>(e.q_begin + t) * heads + h) * width;
      for (int k = 0; k < width; ++k) {
        out[at + k] = sm.any_visible(r) ? acc(r, k) / sm.sum(r) : 0.0;
      }
      if (lse != nullptr) (*lse)[static_cast<size_t>(e.q_begin + t) * heads + h] = sm.lse(r);
    }
  }
}

void check_request(const VerifyParams& p, int32_t request) {
  if (request < 0 || request >= p.batch_size) {
    throw InvalidInput("request", request,
                       "outside the batch of " + std::to_string(p.batch_size) + " requests");
  }
}

void check_size(const char* field, size_t got, int64_t expect, const std::string& shape) {
  if (static_cast<int64_t>(got) != expect) {
    throw InvalidInput(field, -1,
                       "expected " + shape + " = " + std::to_string(expect) + " entries, got " +
                           std::to_string(got));
  }
}

int64_t total_tokens(const VerifyParams& p) { return p.qo_indptr[p.batch_size]; }

// Absorbed scores of a chunk: s = sm_scale * (q_lat c^T + q_pe k_pe^T), masked.
void absorbed_chunk_scores(const VerifyParams& p, const RequestExtent& e, const BitRows& block,
                           const RowMat& q_lat, const RowMat& q_pe, int64_t n0, int64_t n1,
                           const RowMat& c, const RowMat& k_pe, RowMat& s) {
  s.noalias() = q_lat * c.transpose();  // [D * H, K]
  s.noalias() += q_pe * k_pe.transpose();
  s *= static_cast<double>(p.sm_scale);
  apply_mask(block, e, p.num_heads, n0, n1, s);
}

// Non-absorbed scores of a chunk: per head, k_nope = c W_kc[h]^T [K, 128] explicitly, then
// s = sm_scale * (q_nope k_nope^T + q_pe k_pe^T), masked.
void nonabsorbed_chunk_scores(const VerifyParams& p, const RequestExtent& e, const BitRows& block,
                              const RowMat& q_nope, const RowMat& q_pe,
                              const std::vector<double>& w_kc, int64_t n0, int64_t n1,
                              const RowMat& c, const RowMat& k_pe, RowMat& s) {
  const int32_t D = e.draft_nodes;
  s.resize(q_pe.rows(), n1 - n0);  // [H * D, K]
  for (int32_t h = 0; h < p.num_heads; ++h) {
    Eigen::Map<const RowMat> w(w_kc.data() + static_cast<size_t>(h) * kNopeDim * kLatentDim,
                               kNopeDim, kLatentDim);  // W_kc[h] [128, 512]
    RowMat k_nope = c * w.transpose();                 // [K, 128]: row n is W_kc[h] c_n
    auto rows = s.middleRows(static_cast<int64_t>(h) * D, D);
    rows.noalias() = q_nope.middleRows(static_cast<int64_t>(h) * D, D) * k_nope.transpose();
    rows.noalias() += q_pe.middleRows(static_cast<int64_t>(h) * D, D) * k_pe.transpose();
  }
  s *= static_cast<double>(p.sm_scale);
  apply_mask(block, e, p.num_heads, n0, n1, s);
}

// q_nope rows of one request from a [T, H, 128] vector, head-major like the other query rows.
RowMat request_q_nope(const VerifyParams& p, const RequestExtent& e,
                      const std::vector<double>& q_nope) {
  const int32_t D = e.draft_nodes, H = p.num_heads;
  RowMat out(static_cast<int64_t>(D) * H, kNopeDim);  // [H * D, 128]
  for (int32_t h = 0; h < H; ++h) {
    for (int32_t t = 0; t < D; ++t) {
      size_t at = (static_cast<size_t>(e.q_begin + t) * H + h) * kNopeDim;
      for (int k = 0; k < kNopeDim; ++k) out(row_of(h, t, D), k) = q_nope[at + k];
    }
  }
  return out;
}

// Copies a request's scores [H * D, K] chunk into the [D, H, P + D] output.
void scatter_scores(const RequestExtent& e, int32_t heads, int64_t n0, const RowMat& s,
                    std::vector<double>& out) {
  const int32_t D = e.draft_nodes;
  const int64_t keys = e.prefix_len + D;
  for (int32_t t = 0; t < D; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      for (int64_t k = 0; k < s.cols(); ++k) {
        out[(static_cast<size_t>(t) * heads + h) * keys + n0 + k] = s(row_of(h, t, D), k);
      }
    }
  }
}

void check_nonabsorbed_sizes(const VerifyParams& p, const std::vector<double>& q_nope,
                             const std::vector<double>& w_kc) {
  const int64_t H = p.num_heads;
  check_size("q_nope", q_nope.size(), total_tokens(p) * H * kNopeDim, "[T, H, 128]");
  check_size("w_kc", w_kc.size(), H * kNopeDim * kLatentDim, "[H, 128, 512]");
}

}  // namespace

void read_key(const VerifyParams& p, int32_t request, int64_t j, double* row576) {
  const KeyPlace at = key_place(p, request_extent(p, request), j);
  load_row(p.kv_dtype, at.base, at.latent, kLatentDim, row576);
  load_row(p.kv_dtype, at.base, at.rope, kRopeDim, row576 + kLatentDim);
}

void read_query(const VerifyParams& p, int64_t token, int32_t head, double* row576) {
  const int64_t base = token * p.q_token_stride + head * p.q_head_stride;
  load_row(p.q_dtype, p.q, base + p.q_latent_offset, kLatentDim, row576);
  load_row(p.q_dtype, p.q, base + p.q_rope_offset, kRopeDim, row576 + kLatentDim);
}

RefResult reference_verify(const VerifyParams& p, LseBase base) {
  validate_params(p);
  RefResult res;
  res.tokens = total_tokens(p);
  res.heads = p.num_heads;
  res.o_lat.assign(static_cast<size_t>(res.tokens) * p.num_heads * kLatentDim, 0.0);
  res.lse.assign(static_cast<size_t>(res.tokens) * p.num_heads, kNegInf);
  for (int32_t i = 0; i < p.batch_size; ++i) {
    RequestExtent e = request_extent(p, i);
    BitRows block = draft_block(p, i);  // [D_i, D_i]
    RowMat q_lat, q_pe, s;
    load_queries(p, e, q_lat, q_pe);
    OnlineSoftmax sm(q_lat.rows());
    RowMat acc = RowMat::Zero(q_lat.rows(), kLatentDim);  // [H * D, 512]
    for_each_key_chunk(p, e, [&](int64_t n0, int64_t n1, const RowMat& c, const RowMat& k_pe) {
      absorbed_chunk_scores(p, e, block, q_lat, q_pe, n0, n1, c, k_pe, s);
      Eigen::VectorXd alpha = sm.step(s);  // s now holds exp(s - m_new)
      acc = alpha.asDiagonal() * acc;
      acc.noalias() += s * c;  // V is c (docs/spec.md §1)
    });
    finish_rows(e, p.num_heads, sm, acc, kLatentDim, res.o_lat, &res.lse);
  }
  if (base == LseBase::Base2) {
    for (double& v : res.lse) v /= std::log(2.0);  // -inf stays -inf
  }
  return res;
}

std::vector<double> reference_scores(const VerifyParams& p, int32_t request) {
  validate_params(p);
  check_request(p, request);
  RequestExtent e = request_extent(p, request);
  BitRows block = draft_block(p, request);
  RowMat q_lat, q_pe, s;
  load_queries(p, e, q_lat, q_pe);
  std::vector<double> out(static_cast<size_t>(e.draft_nodes) * p.num_heads *
                          (e.prefix_len + e.draft_nodes));  // [D, H, P + D]
  for_each_key_chunk(p, e, [&](int64_t n0, int64_t n1, const RowMat& c, const RowMat& k_pe) {
    absorbed_chunk_scores(p, e, block, q_lat, q_pe, n0, n1, c, k_pe, s);
    scatter_scores(e, p.num_heads, n0, s, out);
  });
  return out;
}

std::vector<double> absorb_query(const std::vector<double>& q_nope, const std::vector<double>& w_kc,
                                 int32_t heads) {
  if (heads < 1) throw InvalidInput("heads", -1, "must be >= 1, got " + std::to_string(heads));
  check_size("w_kc", w_kc.size(), static_cast<int64_t>(heads) * kNopeDim * kLatentDim,
             "[H, 128, 512]");
  const size_t row = static_cast<size_t>(heads) * kNopeDim;
  if (q_nope.size() % row != 0) {
    throw InvalidInput("q_nope", -1,
                       "size " + std::to_string(q_nope.size()) +
                           " is not a multiple of H * 128 = " + std::to_string(row));
  }
  const int64_t tokens = static_cast<int64_t>(q_nope.size() / row);
  std::vector<double> q_lat(static_cast<size_t>(tokens) * heads * kLatentDim);  // [T, H, 512]
  for (int32_t h = 0; h < heads; ++h) {
    Eigen::Map<const RowMat> w(w_kc.data() + static_cast<size_t>(h) * kNopeDim * kLatentDim,
                               kNopeDim, kLatentDim);  // W_kc[h] [128, 512]
    // Rows of head h are strided by H * 128 (resp. H * 512) in the [T, H, *] layouts.
    Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> qn(
        q_nope.data() + static_cast<size_t>(h) * kNopeDim, tokens, kNopeDim,
        Eigen::OuterStride<>(static_cast<int64_t>(heads) * kNopeDim));  // [T, 128]
    Eigen::Map<RowMat, 0, Eigen::OuterStride<>> ql(
        q_lat.data() + static_cast<size_t>(h) * kLatentDim, tokens, kLatentDim,
        Eigen::OuterStride<>(static_cast<int64_t>(heads) * kLatentDim));  // [T, 512]
    ql.noalias() = qn * w;
  }
  return q_lat;
}

RefResult nonabsorbed_verify(const VerifyParams& p, const std::vector<double>& q_nope,
                             const std::vector<double>& w_kc, const std::vector<double>& w_vc,
                             std::vector<double>* o_full) {
  validate_params(p);
  check_nonabsorbed_sizes(p, q_nope, w_kc);
  const int32_t H = p.num_heads;
  check_size("w_vc", w_vc.size(), static_cast<int64_t>(H) * kLatentDim * kVHeadDim,
             "[H, 512, 128]");
  RefResult res;
  res.tokens = total_tokens(p);
  res.heads = H;
  res.o_lat.assign(static_cast<size_t>(res.tokens) * H * kLatentDim, 0.0);
  res.lse.assign(static_cast<size_t>(res.tokens) * H, kNegInf);
  std::vector<double> full(static_cast<size_t>(res.tokens) * H * kVHeadDim, 0.0);  // [T, H, 128]
  for (int32_t i = 0; i < p.batch_size; ++i) {
    RequestExtent e = request_extent(p, i);
    const int32_t D = e.draft_nodes;
    BitRows block = draft_block(p, i);
    RowMat q_lat_unused, q_pe, s;
    load_queries(p, e, q_lat_unused, q_pe);
    RowMat qn = request_q_nope(p, e, q_nope);  // [H * D, 128]
    OnlineSoftmax sm(qn.rows());
    RowMat acc_lat = RowMat::Zero(qn.rows(), kLatentDim);  // [H * D, 512]
    RowMat acc_v = RowMat::Zero(qn.rows(), kVHeadDim);     // [H * D, 128]
    for_each_key_chunk(p, e, [&](int64_t n0, int64_t n1, const RowMat& c, const RowMat& k_pe) {
      nonabsorbed_chunk_scores(p, e, block, qn, q_pe, w_kc, n0, n1, c, k_pe, s);
      Eigen::VectorXd alpha = sm.step(s);
      acc_lat = alpha.asDiagonal() * acc_lat;
      acc_lat.noalias() += s * c;
      acc_v = alpha.asDiagonal() * acc_v;
      for (int32_t h = 0; h < H; ++h) {
        Eigen::Map<const RowMat> w(w_vc.data() + static_cast<size_t>(h) * kLatentDim * kVHeadDim,
                                   kLatentDim, kVHeadDim);  // W_vc[h] [512, 128]
        RowMat v = c * w;                                   // [K, 128]: row n is W_vc[h]^T c_n
        acc_v.middleRows(static_cast<int64_t>(h) * D, D).noalias() +=
            s.middleRows(static_cast<int64_t>(h) * D, D) * v;
      }
    });
    finish_rows(e, H, sm, acc_lat, kLatentDim, res.o_lat, &res.lse);
    finish_rows(e, H, sm, acc_v, kVHeadDim, full, nullptr);
  }
  if (o_full != nullptr) *o_full = std::move(full);
  return res;
}

std::vector<double> nonabsorbed_scores(const VerifyParams& p, int32_t request,
                                       const std::vector<double>& q_nope,
                                       const std::vector<double>& w_kc) {
  validate_params(p);
  check_request(p, request);
  check_nonabsorbed_sizes(p, q_nope, w_kc);
  RequestExtent e = request_extent(p, request);
  BitRows block = draft_block(p, request);
  RowMat q_lat_unused, q_pe, s;
  load_queries(p, e, q_lat_unused, q_pe);
  RowMat qn = request_q_nope(p, e, q_nope);
  std::vector<double> out(static_cast<size_t>(e.draft_nodes) * p.num_heads *
                          (e.prefix_len + e.draft_nodes));  // [D, H, P + D]
  for_each_key_chunk(p, e, [&](int64_t n0, int64_t n1, const RowMat& c, const RowMat& k_pe) {
    nonabsorbed_chunk_scores(p, e, block, qn, q_pe, w_kc, n0, n1, c, k_pe, s);
    scatter_scores(e, p.num_heads, n0, s, out);
  });
  return out;
}

}  // namespace mlaverify::model

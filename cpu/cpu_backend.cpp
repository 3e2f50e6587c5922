// The CPU backend's algorithm: split-KV online softmax over kKvTile key tiles, tree-masked draft
// partial, exact merge (split_plan.h). Compiled twice: mlaverify_cpu and, with -DMLAV_CPU_FAULTS,
// mlaverify_cpu_faults, where each CpuFault lives in the line its real-world bug would.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "cpu/thread_pool.h"
#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/types.h"
#include "model/bitrows.h"
#include "model/mask.h"
#include "model/validate.h"

namespace mlaverify::cpu {
inline namespace MLAV_CPU_VARIANT {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kPartialStride = kLatentDim + 1;  // o (512) then lse, per (partial, token, head)
constexpr int kQueryBlock = 16;                 // at most this many draft queries per work item
constexpr int kRowsPerItem = 32;                // (head, query) rows per work item, heads grouped
constexpr int kDotLanes = 16;                   // interleaved partial sums of the score dot product
constexpr int kPvChunk = 64;                    // output columns of P @ V kept in registers
constexpr int kMaxDraftNodes = 1024;

#if defined(MLAV_CPU_FAULTS)
// In the fault build a check reads the option; elsewhere it is a constant false and the faulty
// branch compiles out entirely.
#define MLAV_FAULT(ctx, f) ((ctx).fault == CpuFault::f)
#else
#define MLAV_FAULT(ctx, f) false
#endif

// One element of a bf16 or fp32 buffer as the kernel's bf16 operand (fp32 storage is rounded).
inline float load_operand(DType dtype, const void* base, int64_t index) {
  if (dtype == DType::BF16) return bf16_to_float(static_cast<const bf16*>(base)[index]);
  return round_bf16(static_cast<const float*>(base)[index]);
}

inline void load_operands(DType dtype, const void* base, int64_t index, int n, float* out) {
  if (dtype == DType::BF16) {
    const bf16* src = static_cast<const bf16*>(base) + index;
    for (int k = 0; k < n; ++k) out[k] = bf16_to_float(src[k]);
  } else {
    const float* src = static_cast<const float*>(base) + index;
    for (int k = 0; k < n; ++k) out[k] = round_bf16(src[k]);
  }
}

// The 576-long score dot product in the fixed order cpu_backend.h documents: 16 interleaved lane
// sums, then the pairwise tree u += u+8, u += u+4, u += u+2, u += u+1. The lane loop is written so
// the compiler vectorizes it without reassociating anything.
inline float reduce_lanes(float* lane) {  // lane: [16]
  for (int u = 0; u < 8; ++u) lane[u] += lane[u + 8];
  for (int u = 0; u < 4; ++u) lane[u] += lane[u + 4];
  for (int u = 0; u < 2; ++u) lane[u] += lane[u + 2];
  return lane[0] + lane[1];
}

inline float dot_row(const float* q, const float* k) {  // q, k: [576]
  float lane[kDotLanes] = {};
  for (int base = 0; base < kRowDim; base += kDotLanes) {
    for (int u = 0; u < kDotLanes; ++u) lane[u] += q[base + u] * k[base + u];
  }
  return reduce_lanes(lane);
}

// Four dot_row results against one key row at once: the same per-lane order for each (so the
// same bits), but four independent add chains to hide the adder latency and one load of k for four.
inline void dot_rows4(const float* q, const float* k, float* out) {  // q: [4, 576], k: [576]
  float lane[4][kDotLanes] = {};
  for (int base = 0; base < kRowDim; base += kDotLanes) {
    for (int r = 0; r < 4; ++r) {
      for (int u = 0; u < kDotLanes; ++u) lane[r][u] += q[r * kRowDim + base + u] * k[base + u];
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = reduce_lanes(lane[r]);
}

// Everything a work item reads, decoded once per run on the calling thread.
struct RunContext {
  const VerifyParams* p;
  CpuFault fault;
  bool folded;       // CpuOptions::folded
  int32_t partials;  // num_splits, plus the draft's own partial unless folded
  std::vector<RequestExtent> extents;               // [bs]
  std::vector<int32_t> splits;  // [bs] each request's split count: num_splits, or the balanced plan's
  std::vector<std::vector<uint8_t>> draft_visible;  // [bs][D_i * D_i]: query t sees column j
  float* workspace;                                 // [num_partials, T, H, 513]
  int64_t tokens;                                   // T = qo_indptr[bs]
};

// A work item: one partial of one request for a block of heads x a block of draft queries. Its
// rows are the (head, query) pairs, head-major; they all meet each key tile, which is gathered
// once per item (MQA: every head of a request reads the same KV rows).
struct WorkItem {
  int32_t request;
  int32_t partial;  // 0..num_splits-1: prefix splits (folded: the splits); num_splits: the draft
  int32_t head_begin;
  int32_t head_end;
  int32_t query_begin;  // within the request
  int32_t query_end;
};

inline float* partial_slot(const RunContext& ctx, int32_t partial, int64_t token, int32_t head) {
  const VerifyParams& p = *ctx.p;
  return ctx.workspace +
         ((static_cast<int64_t>(partial) * ctx.tokens + token) * p.num_heads + head) *
             kPartialStride;
}

// Gathers the logical rows [c | k_pe] of `n` prefix keys into tile (as bf16 operand values).
void gather_prefix_tile(const VerifyParams& p, const int64_t* slots, int n,
                        float* tile) {  // [n, 576]
  for (int j = 0; j < n; ++j) {
    float* row = tile + static_cast<int64_t>(j) * kRowDim;
    load_operands(p.kv_dtype, p.kv_pool, p.kv_layout.latent_index(slots[j]), kLatentDim, row);
    load_operands(p.kv_dtype, p.kv_pool, p.kv_layout.rope_index(slots[j]), kRopeDim,
                  row + kLatentDim);
  }
}

// Gathers draft keys [first, first + n) of request e: k_extend rows or the request's draft slots.
void gather_draft_tile(const VerifyParams& p, const RequestExtent& e, int64_t first, int n,
                       float* tile) {  // [n, 576]
  if (p.draft_source == DraftKvSource::ExtendRows) {
    for (int j = 0; j < n; ++j) {
      // k_extend rows are latent-first [c | k_pe] (verify_params.h), one per query token.
      int64_t row = e.q_begin + first + j;
      load_operands(p.kv_dtype, p.k_extend, row * p.k_extend_stride, kRowDim,
                    tile + static_cast<int64_t>(j) * kRowDim);
    }
  } else {
    gather_prefix_tile(p, p.kv_indices + e.kv_begin + e.prefix_len + first, n, tile);
  }
}

// Online-softmax state of one (token, head) row of a partial.
struct RowState {
  float m = kNegInf;  // running max of visible scores
  float l = 0.f;      // running sum of exp(s - m), unrounded fp32
};

// One work item: the partial (o, lse) of its (head, query) rows.
// Cloned for AVX-512 and AVX2 with a runtime dispatch (GCC function multiversioning), so a wider
// vector unit is used where present and the binary still runs anywhere. Every clone computes the
// same bits: the lanes of dot_row and the elementwise P @ V loops are independent per element,
// -ffp-contract=off forbids FMA, and nothing is reassociated, whatever the vector width.
// Not under sanitizers: their runtime is not up yet when the loader runs the ifunc resolver.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void run_item(const RunContext& ctx, const WorkItem& item) {
  const VerifyParams& p = *ctx.p;
  const RequestExtent& e = ctx.extents[item.request];
  const int queries = item.query_end - item.query_begin;
  const int nq = (item.head_end - item.head_begin) * queries;  // rows of this item
  auto query_of = [&](int r) { return item.query_begin + r % queries; };
  auto head_of = [&](int r) { return item.head_begin + r / queries; };
  // Query rows [q_lat | q_pe], converted once per item.
  std::vector<float> q(static_cast<size_t>(nq) * kRowDim);  // [nq, 576]
  for (int r = 0; r < nq; ++r) {
    int64_t base = (e.q_begin + query_of(r)) * p.q_token_stride +
                   static_cast<int64_t>(head_of(r)) * p.q_head_stride;
    load_operands(p.q_dtype, p.q, base + p.q_latent_offset, kLatentDim, &q[r * kRowDim]);
    load_operands(p.q_dtype, p.q, base + p.q_rope_offset, kRopeDim, &q[r * kRowDim + kLatentDim]);
  }

  // Key ranges of this partial, in the order its tiles are processed: a prefix chunk
  // (split_plan.h split_range) or the draft block's D_i columns; folded, the split's draft
  // columns and then its prefix chunk (folded_range).
  struct Segment {
    bool draft;
    int64_t begin, end;
  };
  Segment segments[2];
  int num_segments = 0;
  bool empty_split = false;
  // The count the request's ranges are cut by: its own (num_splits, or the balanced plan's n_i).
  int32_t range_splits = ctx.splits[item.request];
  // A partial past the planned count: only the fault marks it (correct code cuts an empty range
  // there anyway).
  bool unplanned = false;
  if (MLAV_FAULT(ctx, BalancedRangesFromCap) && p.plan_blocks > 0) {
    // The bug: only the n_i planned splits are launched (the partials past them see no key), and
    // each cuts its range as if the request had all num_splits.
    unplanned = item.partial >= range_splits;
    range_splits = p.num_splits;
  }
  if (ctx.folded) {
    FoldedRange range = folded_range(e.prefix_len, e.draft_nodes, range_splits, item.partial);
    if (unplanned) range = FoldedRange{0, 0, 0, 0};
    segments[num_segments++] = {true, range.draft_begin, range.draft_end};
    segments[num_segments++] = {false, range.prefix_begin, range.prefix_end};
    empty_split = range.empty();
  } else if (item.partial == p.num_splits) {
    segments[num_segments++] = {true, 0, e.draft_nodes};
  } else {
    SplitRange range = split_range(e.prefix_len, range_splits, item.partial);
    if (unplanned) range = SplitRange{e.prefix_len, e.prefix_len};
    segments[num_segments++] = {false, range.begin, range.end};
    empty_split = range.empty();
  }
  for (int g = 0; g < num_segments; ++g) {
    Segment& seg = segments[g];
    if (!seg.draft && MLAV_FAULT(ctx, OverReadNextRequest)) {
      // The bug: the split holding the end of the prefix loops `j <= end` and reads one more
      // kv_indices entry (the next request's first slot, or this request's first draft slot).
      // Only taken when the entry exists and names a pool slot: the CPU must not fault itself.
      bool holds_end = seg.end == e.prefix_len && (seg.begin < seg.end || item.partial == 0);
      int64_t extra = e.kv_begin + e.prefix_len;
      if (holds_end && extra < p.kv_indices_len && p.kv_indices[extra] >= 0 &&
          p.kv_indices[extra] < p.pool_slots) {
        seg.end += 1;
        empty_split = false;
      }
    }
  }

  std::vector<RowState> state(nq);
  std::vector<float> acc(static_cast<size_t>(nq) * kLatentDim, 0.f);   // [nq, 512]
  std::vector<float> tile(static_cast<size_t>(kKvTile) * kRowDim);     // [kKvTile, 576]
  std::vector<float> scores(static_cast<size_t>(nq) * kKvTile);        // [nq, kKvTile]
  std::vector<float> probs(static_cast<size_t>(nq) * kKvTile);         // [nq, kKvTile] bf16 P
  std::vector<uint8_t> visible(static_cast<size_t>(nq) * kKvTile, 1);  // [nq, kKvTile]
  std::vector<float> alpha(nq);                                        // [nq]
  std::vector<uint8_t> live(nq);                                       // [nq] row saw a key
  const uint8_t* draft_mask = ctx.draft_visible[item.request].data();
  // V is c, the first 512 entries of the logical row (docs/spec.md §1).
  const int v_offset = MLAV_FAULT(ctx, VFromWrongColumns) ? kRopeDim : 0;

  for (int g = 0; g < num_segments; ++g) {
    const bool draft = segments[g].draft;
    const int64_t key_end = segments[g].end;
    // Folded, the prefix tiles follow the draft's in the same item: every key visible again.
    if (!draft && g > 0) std::fill(visible.begin(), visible.end(), uint8_t{1});
    for (int64_t tile_begin = segments[g].begin; tile_begin < key_end; tile_begin += kKvTile) {
      int64_t tile_end = std::min<int64_t>(tile_begin + kKvTile, key_end);
      if (!draft && MLAV_FAULT(ctx, SplitEndOffByOne) && tile_end == key_end) {
        tile_end -= 1;  // the bug: the split's last tile bound computed as `end - 1`
      }
      const int n = static_cast<int>(tile_end - tile_begin);
      if (n <= 0) continue;
      if (draft) {
        gather_draft_tile(p, e, tile_begin, n, tile.data());
        for (int r = 0; r < nq; ++r) {
          const int64_t row = static_cast<int64_t>(query_of(r)) * e.draft_nodes;
          for (int j = 0; j < n; ++j) visible[r * kKvTile + j] = draft_mask[row + tile_begin + j];
        }
      } else {
        gather_prefix_tile(p, p.kv_indices + e.kv_begin + tile_begin, n, tile.data());
      }

      // Phase 1, scores. Key-major so one key row stays in L1 while every query row meets it; each
      // score is one dot_row in its fixed order, so the loop order changes no bit.
      // Masked entries may be computed too (four rows at a time) but are never read.
      for (int j = 0; j < n; ++j) {
        const float* k_row = &tile[static_cast<int64_t>(j) * kRowDim];
        int r = 0;
        for (; r + 4 <= nq; r += 4) {
          float dots[4];
          dot_rows4(&q[r * kRowDim], k_row, dots);
          for (int u = 0; u < 4; ++u) scores[(r + u) * kKvTile + j] = p.sm_scale * dots[u];
        }
        for (; r < nq; ++r) {
          if (!visible[r * kKvTile + j]) continue;
          scores[r * kKvTile + j] = p.sm_scale * dot_row(&q[r * kRowDim], k_row);
        }
      }

      // Phase 2, per row: the tile max, the rescale factor, the probabilities.
      for (int r = 0; r < nq; ++r) {
        const float* s_row = &scores[r * kKvTile];
        const uint8_t* vis = &visible[r * kKvTile];
        float tile_max = kNegInf;
        for (int j = 0; j < n; ++j) {
          if (vis[j]) tile_max = std::max(tile_max, s_row[j]);
        }
        RowState& st = state[r];
        const float m_new = std::max(st.m, tile_max);
        // Nothing visible so far: keep the empty state, so exp(-inf - -inf) never happens.
        live[r] = m_new != kNegInf;
        if (!live[r]) continue;
        // m = -inf (first visible tile) gives alpha = 0, and acc, l are still 0.
        alpha[r] = std::exp(st.m - m_new);
        float tile_l = 0.f;
        float* p_row = &probs[r * kKvTile];
        for (int j = 0; j < n; ++j) {
          if (!vis[j]) continue;
          const float prob = std::exp(s_row[j] - m_new);
          tile_l += prob;               // l sums the unrounded fp32 probabilities
          p_row[j] = round_bf16(prob);  // the P operand of the P @ V product
        }
        st.l = st.l * alpha[r] + tile_l;
        st.m = m_new;
      }

      // Phase 3, pv = P @ V and acc = acc * alpha + pv, one 64-column chunk of one row at a time so
      // the chunk's partial sums stay in registers while the keys stream past; each element still
      // adds its keys in increasing order, and pv is complete before it meets acc.
      for (int r = 0; r < nq; ++r) {
        if (!live[r]) continue;
        const float* p_row = &probs[r * kKvTile];
        const uint8_t* vis = &visible[r * kKvTile];
        float* acc_row = &acc[r * kLatentDim];
        const float a = alpha[r];
        for (int chunk = 0; chunk < kLatentDim; chunk += kPvChunk) {
          float pv[kPvChunk] = {};  // [64]
          for (int j = 0; j < n; ++j) {
            if (!vis[j]) continue;
            const float prob_bf16 = p_row[j];
            const float* v = &tile[static_cast<int64_t>(j) * kRowDim + v_offset + chunk];
            for (int k = 0; k < kPvChunk; ++k) pv[k] += prob_bf16 * v[k];
          }
          for (int k = 0; k < kPvChunk; ++k) acc_row[chunk + k] = acc_row[chunk + k] * a + pv[k];
        }
      }
    }
  }

  for (int r = 0; r < nq; ++r) {
    float* out = partial_slot(ctx, item.partial, e.q_begin + query_of(r), head_of(r));
    const RowState& st = state[r];
    if (st.l == 0.f) {
      // No visible key: this partial drops out of the merge (lse = -inf), o = 0.
      std::fill(out, out + kLatentDim, 0.f);
      out[kLatentDim] = kNegInf;
      if (empty_split && MLAV_FAULT(ctx, EmptySplitAsZeros)) {
        out[kLatentDim] = 0.f;  // the bug: an empty split's early exit stores lse = 0
      }
      continue;
    }
    const float* acc_row = &acc[r * kLatentDim];
    for (int k = 0; k < kLatentDim; ++k) out[k] = acc_row[k] / st.l;
    out[kLatentDim] = st.m + std::log(st.l);
  }
}

// Merges the partials of (token, head) exactly (split_plan.h item 4) and writes o_lat and lse.
void merge_row(const RunContext& ctx, int64_t token, int32_t head) {
  const VerifyParams& p = *ctx.p;
  const int32_t partials = ctx.partials;
  float lse_max = kNegInf;
  bool nan_seen = false;
  for (int32_t s = 0; s < partials; ++s) {
    float lse_s = partial_slot(ctx, s, token, head)[kLatentDim];
    if (std::isnan(lse_s)) nan_seen = true;
    if (lse_s > lse_max) lse_max = lse_s;
  }
  float o[kLatentDim];  // [512]
  float lse;
  if (nan_seen) {
    // NaN in an operand must reach the output, not vanish because NaN compares false.
    std::fill(o, o + kLatentDim, std::numeric_limits<float>::quiet_NaN());
    lse = std::numeric_limits<float>::quiet_NaN();
  } else if (lse_max == kNegInf) {
    std::fill(o, o + kLatentDim, 0.f);  // fully masked row: zeros and lse = -inf, never NaN
    lse = kNegInf;
  } else {
    std::fill(o, o + kLatentDim, 0.f);
    float weight_sum = 0.f;
    int32_t merged = 0;
    for (int32_t s = 0; s < partials; ++s) {
      const float* part = partial_slot(ctx, s, token, head);
      if (part[kLatentDim] == kNegInf) continue;  // skipped, so -inf - -inf cannot occur
      // Each o_s is normalized by its own sum; exp(lse_s - M) restores its share of the total.
      const float w = std::exp(part[kLatentDim] - lse_max);
      weight_sum += w;
      ++merged;
      const float w_o = MLAV_FAULT(ctx, MergeWithoutRescale) ? 1.f : w;  // the bug: no rescale
      for (int k = 0; k < kLatentDim; ++k) o[k] += w_o * part[k];
    }
    const float o_divisor =
        MLAV_FAULT(ctx, MergeWithoutRescale) ? static_cast<float>(merged) : weight_sum;
    for (int k = 0; k < kLatentDim; ++k) o[k] /= o_divisor;
    lse = lse_max + std::log(weight_sum);
  }
  const int64_t base = token * p.o_token_stride + static_cast<int64_t>(head) * p.o_head_stride;
  if (p.o_dtype == DType::BF16) {
    bf16* dst = static_cast<bf16*>(p.o_lat) + base;
    for (int k = 0; k < kLatentDim; ++k) dst[k] = float_to_bf16(o[k]);  // the one rounding of o
  } else {
    float* dst = static_cast<float*>(p.o_lat) + base;
    std::memcpy(dst, o, sizeof o);
  }
  p.lse[token * p.num_heads + head] = lse;
}

// The D_i x D_i visibility block of one request, with the mask faults applied where a kernel
// would build its mask.
std::vector<uint8_t> decode_draft_block(const VerifyParams& p, int32_t request,
                                        [[maybe_unused]] CpuFault fault) {
  model::BitRows bits = model::draft_block(p, request);
  const int32_t d = bits.rows();
  std::vector<uint8_t> visible(static_cast<size_t>(d) * d);  // [D_i, D_i]
  for (int32_t t = 0; t < d; ++t) {
    for (int32_t j = 0; j < d; ++j) visible[static_cast<size_t>(t) * d + j] = bits.test(t, j);
  }
#if defined(MLAV_CPU_FAULTS)
  if (fault == CpuFault::ParentOnlyMask) {
    // The bug: a mask built from parent[] alone. In topological order the parent is the ancestor
    // with the largest index, so keep that column and the diagonal, drop the older ancestors.
    for (int32_t t = 0; t < d; ++t) {
      int32_t parent = -1;
      for (int32_t j = 0; j < t; ++j) {
        if (visible[static_cast<size_t>(t) * d + j]) parent = j;
      }
      for (int32_t j = 0; j < t; ++j) visible[static_cast<size_t>(t) * d + j] = j == parent;
    }
  } else if (fault == CpuFault::NoDiagonal) {
    for (int32_t t = 0; t < d; ++t) visible[static_cast<size_t>(t) * d + t] = 0;
  }
#endif
  return visible;
}

bool operand_dtype_ok(DType d) { return d == DType::BF16 || d == DType::F32; }

}  // namespace

CpuBackend::CpuBackend(CpuOptions options) : options_(options) {
  int threads = options_.threads;
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  pool_ = std::make_unique<ThreadPool>(threads);
}

CpuBackend::~CpuBackend() = default;

int CpuBackend::threads() const { return pool_->threads(); }

bool CpuBackend::faults_compiled_in() {
#if defined(MLAV_CPU_FAULTS)
  return true;
#else
  return false;
#endif
}

std::string CpuBackend::name() const {
  if (!options_.folded && options_.fault == CpuFault::None) return "cpu";
  std::string name = "cpu[";
  if (options_.folded) name.append("folded");
  if (options_.folded && options_.fault != CpuFault::None) name.append(",");
  if (options_.fault != CpuFault::None) name.append("fault=").append(fault_name(options_.fault));
  return name.append("]");
}

Capabilities CpuBackend::capabilities() const {
  Capabilities c;
  c.numerics.accumulate_unit = 0x1.0p-24;  // plain fp32 adds, round to nearest, no FMA
  c.numerics.tile_keys = kKvTile;
  c.honours_num_splits = true;  // split_range / folded_range: exactly num_splits chunks
  return c;
}

Support CpuBackend::can_implement(const VerifyParams& p) const {
  if (options_.fault != CpuFault::None && !faults_compiled_in()) {
    return Support::no("fault " + std::string(fault_name(options_.fault)) +
                       " is compiled only into mlaverify_cpu_faults (-DMLAV_CPU_FAULTS)");
  }
  if (p.max_draft > kMaxDraftNodes) {
    return Support::no("max_draft " + std::to_string(p.max_draft) + " exceeds " +
                       std::to_string(kMaxDraftNodes) + " draft nodes");
  }
  if (!operand_dtype_ok(p.q_dtype)) return Support::no("q_dtype must be bf16 or f32");
  if (!operand_dtype_ok(p.kv_dtype)) return Support::no("kv_dtype must be bf16 or f32");
  if (!operand_dtype_ok(p.o_dtype)) return Support::no("o_dtype must be bf16 or f32");
  return Support::yes();
}

size_t CpuBackend::workspace_bytes(const VerifyParams& p) const {
  if (p.num_splits < 1 || p.max_total_q < 1 || p.num_heads < 1) return 0;
  return static_cast<size_t>(num_partials(p.num_splits)) * static_cast<size_t>(p.max_total_q) *
         static_cast<size_t>(p.num_heads) * kPartialStride * sizeof(float);
}

void CpuBackend::run(const VerifyParams& given) {
  model::validate_params(given);
  if (Support s = can_implement(given); !s) throw Unsupported("cpu backend: " + s.reason);
  // The kernel's algorithm reads token-level int64 indices; int32 ids and page tables are
  // translated first (validated above, so the translation cannot read out of bounds).
  const VerifyParams p = model::with_token_indices(given, kv_indptr_, kv_indices_);

  RunContext ctx;
  ctx.p = &p;
  ctx.fault = options_.fault;
  ctx.folded = options_.folded;
  ctx.partials = ctx.folded ? p.num_splits : num_partials(p.num_splits);
  ctx.tokens = p.qo_indptr[p.batch_size];
  ctx.extents.resize(p.batch_size);
  ctx.draft_visible.resize(p.batch_size);
  for (int32_t i = 0; i < p.batch_size; ++i) {
    ctx.extents[i] = request_extent(p, i);
    ctx.draft_visible[i] = decode_draft_block(p, i, options_.fault);
  }
  // The split plan (split_plan.h), as the CUDA kernel plans it on the device: uniform, or
  // balanced by each request's real length (plan_blocks > 0).
  ctx.splits.assign(p.batch_size, p.num_splits);
  plan_split_counts(
      p.batch_size, p.num_splits, p.plan_blocks,
      [&](int32_t i) {
        return plan_tiles(ctx.extents[i].prefix_len, ctx.extents[i].draft_nodes, ctx.folded);
      },
      [&](int32_t i) { return plan_row_tiles(ctx.extents[i].draft_nodes, p.num_heads); },
      [&](int32_t i, int32_t n) { ctx.splits[i] = n; });
  // workspace_bytes is what a caller provisions from the static maxima; the CPU itself only
  // needs the partials of the T = qo_indptr[bs] real rows (a huge max_total_q must not allocate).
  workspace_.resize(static_cast<size_t>(num_partials(p.num_splits)) *
                    static_cast<size_t>(ctx.tokens) * static_cast<size_t>(p.num_heads) *
                    kPartialStride);
  ctx.workspace = workspace_.data();

  // Work items in request order; the pool's shared counter balances their uneven sizes.
  std::vector<WorkItem> items;
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const int32_t d = ctx.extents[i].draft_nodes;
    const int32_t query_block = std::min(d, kQueryBlock);
    const int32_t head_block = std::max(1, kRowsPerItem / query_block);
    for (int32_t s = 0; s < ctx.partials; ++s) {
      for (int32_t h0 = 0; h0 < p.num_heads; h0 += head_block) {
        const int32_t h1 = std::min(h0 + head_block, p.num_heads);
        for (int32_t q0 = 0; q0 < d; q0 += query_block) {
          items.push_back({i, s, h0, h1, q0, std::min(q0 + query_block, d)});
        }
      }
    }
  }
  pool_->parallel_for(static_cast<int64_t>(items.size()),
                      [&](int64_t k) { run_item(ctx, items[k]); });

  // Merge: one item per block of tokens, all heads.
  constexpr int64_t kMergeTokens = 8;
  const int64_t merge_items = ceil_div(ctx.tokens, kMergeTokens);
  pool_->parallel_for(merge_items, [&](int64_t k) {
    const int64_t end = std::min(ctx.tokens, (k + 1) * kMergeTokens);
    for (int64_t t = k * kMergeTokens; t < end; ++t) {
      for (int32_t h = 0; h < p.num_heads; ++h) merge_row(ctx, t, h);
    }
  });
}

BackendPtr make_cpu_backend(CpuOptions options) { return std::make_shared<CpuBackend>(options); }

}  // namespace MLAV_CPU_VARIANT
}  // namespace mlaverify::cpu

// Device code of the v7 experiment: the split-KV partial kernel with 16 warps (512 threads, at most
// 128 registers each) so each scheduler has 4 warps to switch between; helpers from the v6 .cuh.
#pragma once

#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

// ---------------------------------------------------------------------------------------------
// Same block (64 (node, head) rows, one split or the draft block), tiles, chunk ring and numerics
// as verify_partial (v6); only the warp layout differs. 16 warps = 4 row groups (16 rows) x 4
// quarters, and the row group is the same in both phases:
//   S = Q K^T: warp (rg, kq) owns 16 rows x keys kq*16 .. kq*16+15 of the 64-key tile;
//   O += P V:  warp (rg, kq) owns 16 rows x quarter kq of every V chunk (16 of 64 or 32 of 128
//              columns; 128 output columns: 64 fp32 accumulators per thread, v6 has 128).
// Since a warp's PV rows are its S rows, the softmax rescale and 1 / l stay in registers (v6
// crossed them through smem). The cost: each Q and K fragment feeds fewer mma (S reads Q and K 4x
// per tile instead of 2x and 4x; PV reads V 4x instead of 2x): ~1730 ldmatrix.x4 per tile instead
// of ~1180. Measured on the H200: correct, but 18-47% slower than v6 (cuda/NOTES.md v7), so it is
// an opt-in (MLAV_CUDA_WARPS=16), not the default.
// ---------------------------------------------------------------------------------------------
constexpr int kThreadsW16 = kThreadsPerBlockW16;
static_assert(kThreadsW16 == 512 && kRows == 64, "warp layout: 4 row groups x 4 quarters");

template <int kStages, int kCols>
__global__ void __launch_bounds__(kThreadsW16, 1) verify_partial_w16(const PartialArgs args) {
  static_assert(kStages >= 2, "double buffering at least");
  using CK = Chunking<kCols>;
  constexpr int kKChunks = CK::kKChunks;
  constexpr int kVChunks = CK::kVChunks;
  constexpr int kChunksPerTile = CK::kPerTile;
  constexpr int kChunkElems = CK::kElems;
  constexpr int kRowBytes = CK::kRowBytes;
  constexpr int kNT = CK::kNTiles;  // n8 tiles of a warp's quarter of a V chunk
  const VerifyParams& p = args.p;
  // Split outermost (as v6): prefix blocks first, short draft blocks fill the tail.
  const int32_t req = blockIdx.y;
  const int32_t split = blockIdx.z;
  const bool is_draft = split == p.num_splits;
  const RequestExtent e = request_extent(p, req);
  const int32_t H = p.num_heads;
  // 32-bit rows and keys (fewer live registers than v6's int64): rows per request D * H <= 2^17
  // (check_static), and key offsets are below P_i + D_i, a difference of int32 kv_indptr entries.
  const int32_t valid_rows = e.draft_nodes * H;
  const int32_t row0 = static_cast<int32_t>(blockIdx.x) * kRows;
  if (row0 >= valid_rows) return;  // static grid sized from max_draft: no work for this tile

  int32_t key_begin = 0, key_end = e.draft_nodes;
  if (!is_draft) {
    SplitRange r = split_range(e.prefix_len, p.num_splits, split);
    if (r.empty()) return;  // the merge skips empty splits by the same split_range
    key_begin = static_cast<int32_t>(r.begin);
    key_end = static_cast<int32_t>(r.end);
  }
  const int num_tiles = static_cast<int>((key_end - key_begin + kKvTile - 1) / kKvTile);

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);          // [64, 576]
  __nv_bfloat16* p_s = q_s + kQElems;                                       // [64, 64]
  __nv_bfloat16* kv_s = p_s + kPElems;                                      // [kStages, 64, kCols]
  float* red_max = reinterpret_cast<float*>(kv_s + kStages * kChunkElems);  // [4, 64]
  float* red_sum = red_max + 4 * kRows;                                     // [4, 64]
  uint64_t* vis_s = reinterpret_cast<uint64_t*>(red_sum + 4 * kRows);       // [64]

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int rg = warp >> 2;  // row group: rows rg*16 .. rg*16+15, in S and in PV
  const int kq = warp & 3;   // S: keys kq*16 ..; PV: columns kq*16 .. of every V chunk

  // ---- Q tile: 64 rows x 72 units of 16 bytes, rows past the request zero-filled ----
  {
    const __nv_bfloat16* qbase = static_cast<const __nv_bfloat16*>(p.q);
    for (int u = tid; u < kRows * 72; u += kThreadsW16) {
      int r = u / 72, unit = u % 72;
      const int32_t row = row0 + r;
      const bool ok = row < valid_rows;
      const int64_t t = ok ? row / H : 0, h = ok ? row % H : 0;
      int64_t col = unit < 64 ? p.q_latent_offset + unit * 8 : p.q_rope_offset + (unit - 64) * 8;
      const __nv_bfloat16* src =
          qbase + (e.q_begin + t) * p.q_token_stride + h * p.q_head_stride + col;
      cp_async16(smem_addr(q_s + r * kRowDim + swz(r, unit) * 8), ok ? src : qbase, ok ? 16 : 0);
    }
    cp_async_commit();
  }

  // ---- chunk loader: thread owns key tid / 8 and the 16-byte unit tid % 8 (with 128 columns also
  // unit + 8). 512 threads cover a 64 x 64 chunk with one cp.async each. Chunk steps unrolled at
  // compile time as in v6, so every part index and smem offset is a constant.
  const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  const int ld_key = tid >> 3, ld_unit = tid & 7;
  const bool slots_from_indices = !(is_draft && p.draft_source == DraftKvSource::ExtendRows);
  const int64_t index_base = e.kv_begin + (is_draft ? e.prefix_len : 0);
  // Slot ids one tile ahead, so the dependent index load is in flight while a tile streams.
  auto load_slot = [&](int tile) -> int64_t {
    const int32_t key = key_begin + tile * kKvTile + ld_key;
    return (tile < num_tiles && key < key_end) ? p.kv_indices[index_base + key] : 0;
  };
  int64_t next_slot = slots_from_indices ? load_slot(0) : 0;
  // One 64-bit row offset per thread instead of v6's two row pointers (registers are short under
  // the 128 cap); the pointers are formed at each issue from the (constant-bank) layout.
  int64_t cur_row = 0;
  int src_bytes = 0;  // 16, or 0: zero-fill past key_end (row 0: a valid address, never read)
  auto loader_enter_tile = [&](int tile) {
    const int32_t key = key_begin + tile * kKvTile + ld_key;
    const bool ok = tile < num_tiles && key < key_end;
    src_bytes = ok ? 16 : 0;
    // Prefix keys are the first P_i entries of kv_indices; CacheSlots draft keys follow them.
    cur_row = !ok ? 0 : slots_from_indices ? next_slot : e.q_begin + key;
    if (slots_from_indices) next_slot = load_slot(tile + 1);
  };
  const uint32_t kv_base = smem_addr(kv_s);
  // Destination of this thread's unit in a chunk buffer (swizzled by key & 7); with 128 columns
  // unit + 8 sits 128 bytes further (the swizzle keeps the group of 8).
  const uint32_t ld_dst = ld_key * kRowBytes + (ld_unit ^ (ld_key & 7)) * 16;
  auto issue_part = [&]<int kPart>(uint32_t buf) {
    constexpr bool rope = kPart == kKChunks - 1;  // k_pe: 64 columns, units 0..7 only
    constexpr int off = kPart < kKChunks - 1 ? kPart * kCols
                        : rope               ? 0
                                             : (kPart - kKChunks) * kCols;
    const __nv_bfloat16* src =
        slots_from_indices
            ? pool + (rope ? p.kv_layout.rope_index(cur_row) : p.kv_layout.latent_index(cur_row)) +
                  ld_unit * 8 + off
            : static_cast<const __nv_bfloat16*>(p.k_extend) + cur_row * p.k_extend_stride +
                  (rope ? kLatentDim : 0) + ld_unit * 8 + off;
    cp_async16(buf + ld_dst, src, src_bytes);
    if constexpr (kCols == 128 && !rope) cp_async16(buf + ld_dst + 128, src + 64, src_bytes);
  };

  // ---- per-row softmax state: this thread holds rows lane/4 and lane/4 + 8 of its row group ----
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  float acc[kVChunks][kNT][4];  // [V chunk][n8 tile][fragment]: 16 rows x 128 columns per warp
#pragma unroll
  for (int c = 0; c < kVChunks; ++c)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) acc[c][n][f] = 0.f;

  const int frag_row = lane >> 2;           // C fragment row within the 16-row group (and +8)
  const int frag_col = (lane & 3) * 2;      // C fragment column pair within an n8 tile
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: which 8x8 matrix, which of its rows
  const int a_row = rg * 16 + (lane & 15);  // A operand row this lane addresses (a_row & 7 == mr)
  // Per-lane ldmatrix byte offsets with the swizzle folded in (derivation in verify_kernel.cuh).
  const uint32_t xa0 = ((lane >> 4) ^ mr) * 16;       // A operands (Q, P): b = lane / 16
  const uint32_t xb0 = ((mi & 1) ^ mr) * 16;          // K fragments: b = matrix index & 1
  const int v_unit0 = kq * (kCols / 32) + (mi >> 1);  // V columns of this warp's quarter
  const uint32_t xv0 = ((v_unit0 & ~7) * 16) | (((v_unit0 & 7) ^ mr) * 16);
  const uint32_t q_lane = smem_addr(q_s) + a_row * kRowDim * 2;
  const uint32_t p_lane = smem_addr(p_s) + a_row * kKvTile * 2;
  const uint32_t kb_lane = (kq * 16 + (mi >> 1) * 8 + mr) * kRowBytes;  // K chunk rows (keys)
  const uint32_t vb_lane = ((mi & 1) * 8 + mr) * kRowBytes;             // V chunk rows (keys)

  // sm_scale * log2(e), rounded once to fp32: scores in log2 units (as v6).
  const float scale_log2 = p.sm_scale * 1.4426950408889634f;

  int rd = 0;
  loader_enter_tile(0);
  static_for<0, kStages - 1>([&]<int kP>() {
    issue_part.template operator()<kP>(kv_base + kP * kChunkElems * 2);
    cp_async_commit();
  });
  static_assert(kStages - 1 < kChunksPerTile, "the prologue stays inside tile 0");

  auto step = [&]<int kPart>(int tile) -> uint32_t {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    constexpr int ahead = kPart + kStages - 1;
    constexpr int ahead_part = ahead % kChunksPerTile;
    if constexpr (ahead_part == 0) loader_enter_tile(tile + ahead / kChunksPerTile);
    const int wr = rd == 0 ? kStages - 1 : rd - 1;
    issue_part.template operator()<ahead_part>(kv_base + wr * kChunkElems * 2);
    cp_async_commit();
    const uint32_t buf = kv_base + rd * kChunkElems * 2;
    rd = rd + 1 == kStages ? 0 : rd + 1;
    return buf;
  };

#pragma unroll 1
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int32_t tile_key0 = key_begin + tile * kKvTile;

    // Draft visibility words, one per row (bit k: the row's node sees node tile_key0 + k). Eight
    // threads per row decode 8 keys each, then OR their parts. Read after the S pass (>= 9
    // barriers later); rewritten next tile after the PV pass (>= 8 barriers after the read).
    if (is_draft) {
      const int r = tid >> 3, part = tid & 7;
      const int32_t row = row0 + r;
      uint64_t bits = 0;
      if (row < valid_rows) {
        const int32_t t = row / H;
#pragma unroll 1
        for (int k = 0; k < 8; ++k) {
          const int key_local = part * 8 + k;
          const int32_t key = tile_key0 + key_local;
          if (key < key_end && mask_bit(p, req, e, t, key)) bits |= 1ull << key_local;
        }
      }
      bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 4);
      if (part == 0) vis_s[r] = bits;
    }

    // ---- S = Q K^T over kKChunks chunks: this warp's 16 rows x 16 keys ----
    float s_acc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) s_acc[n][f] = 0.f;

    static_for<0, kKChunks>([&]<int kPart>() {
      const uint32_t buf = step.template operator()<kPart>(tile);
      constexpr int ksteps = kPart == kKChunks - 1 ? kRopeDim / 16 : kCols / 16;
#pragma unroll
      for (int ks = 0; ks < ksteps; ++ks) {
        uint32_t a[4], b0, b1, b2, b3;
        ldmatrix_x4(q_lane + kPart * kCols * 2 + (ks >> 2) * 128 + (xa0 ^ ((ks & 3) * 32)), a[0],
                    a[1], a[2], a[3]);
        ldmatrix_x4(buf + kb_lane + (ks >> 2) * 128 + (xb0 ^ ((ks & 3) * 32)), b0, b1, b2, b3);
        mma_bf16(s_acc[0], a, b0, b1);
        mma_bf16(s_acc[1], a, b2, b3);
      }
    });

    // ---- online softmax over this 64-key tile (split_plan.h numerics 2; as v6, log2 units) ----
    const int32_t left = key_end - tile_key0;
    const int key_limit = left < kKvTile ? left : kKvTile;
    float tile_max[2] = {-INFINITY, -INFINITY};
    // All ones outside the draft block; the lane's 16 keys are bits kq*16 .. of the row's word.
    uint32_t vis[2] = {~0u, ~0u};
    if (is_draft) {
      vis[0] = static_cast<uint32_t>(vis_s[rg * 16 + frag_row] >> (kq * 16));
      vis[1] = static_cast<uint32_t>(vis_s[rg * 16 + frag_row + 8] >> (kq * 16));
    }
    const int limit_in_q = key_limit - kq * 16;  // keys of this quarter inside the split
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int hr = f >> 1;  // fragments 0,1: row frag_row; 2,3: row frag_row + 8
        const int k = n * 8 + frag_col + (f & 1);  // key within this warp's quarter
        const bool visible = k < limit_in_q && ((vis[hr] >> k) & 1u);
        const float t = visible ? s_acc[n][f] * scale_log2 : -INFINITY;
        s_acc[n][f] = t;
        tile_max[hr] = fmaxf(tile_max[hr], t);
      }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 1));
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 2));
      if ((lane & 3) == 0) red_max[kq * kRows + rg * 16 + frag_row + 8 * hr] = tile_max[hr];
    }
    __syncthreads();
    float m_new[2], scale[2], part_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rg * 16 + frag_row + 8 * hr;
      // The four quarters' maxima in a fixed order: all four warps of a row group compute the
      // same m_new, l and scale bit for bit.
      m_new[hr] = fmaxf(m_run[hr], fmaxf(fmaxf(red_max[r], red_max[kRows + r]),
                                         fmaxf(red_max[2 * kRows + r], red_max[3 * kRows + r])));
      // m_new == -inf only when nothing was visible yet: keep the (zero) state as is. Otherwise
      // 2^(-inf - finite) = 0 correctly discards an empty previous state; -inf - -inf never occurs.
      scale[hr] = m_new[hr] == -INFINITY ? 1.f : exp2f(m_run[hr] - m_new[hr]);
    }
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float t0 = s_acc[n][2 * hr], t1 = s_acc[n][2 * hr + 1];
        // Masked keys: t = -inf, probability exactly 0 (see v6); l sums the unrounded fp32
        // values, the tensor cores get them rounded to bf16 (round to nearest even).
        const float p0 = t0 == -INFINITY ? 0.f : exp2f(t0 - m_new[hr]);
        const float p1 = t1 == -INFINITY ? 0.f : exp2f(t1 - m_new[hr]);
        part_sum[hr] += p0 + p1;
        const int r = rg * 16 + frag_row + 8 * hr;
        const int key_local = kq * 16 + n * 8 + frag_col;
        *reinterpret_cast<__nv_bfloat162*>(p_s + r * kKvTile + swz(r, key_local >> 3) * 8 +
                                           frag_col) = __floats2bfloat162_rn(p0, p1);
      }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 1);
      part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 2);
      if ((lane & 3) == 0) red_sum[kq * kRows + rg * 16 + frag_row + 8 * hr] = part_sum[hr];
    }
    __syncthreads();
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rg * 16 + frag_row + 8 * hr;
      // A fixed order, so the four warps of a row group hold the same l bit for bit (each one
      // normalizes its own columns by it at the end).
      l_run[hr] = l_run[hr] * scale[hr] + ((red_sum[r] + red_sum[kRows + r]) +
                                           (red_sum[2 * kRows + r] + red_sum[3 * kRows + r]));
      m_run[hr] = m_new[hr];
    }
#pragma unroll
    for (int c = 0; c < kVChunks; ++c)
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        acc[c][n][0] *= scale[0];
        acc[c][n][1] *= scale[0];
        acc[c][n][2] *= scale[1];
        acc[c][n][3] *= scale[1];
      }
    // P fragments for this warp's 16 rows x 64 keys, reused across every V chunk.
    uint32_t pa[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      ldmatrix_x4(p_lane + (xa0 ^ (ks * 32)), pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3]);

    // ---- O += P V over kVChunks chunks: this warp's 16 rows x its quarter of each chunk ----
    static_for<0, kVChunks>([&]<int kC>() {
      const uint32_t buf = step.template operator()<kKChunks + kC>(tile);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int pair = 0; pair < CK::kPairs; ++pair) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4_trans(buf + vb_lane + ks * 16 * kRowBytes + (xv0 ^ (pair * 32)), b0, b1, b2,
                            b3);
          mma_bf16(acc[kC][pair * 2], pa[ks], b0, b1);
          mma_bf16(acc[kC][pair * 2 + 1], pa[ks], b2, b3);
        }
    });
  }
  cp_async_wait<0>();

  // ---- write the normalized partial (split_plan.h numerics 3) ----
  const int64_t partial = split;
  const int64_t rows_total = p.max_total_q * H;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = rg * 16 + frag_row + 8 * hr;
    const int32_t row = row0 + r;
    if (row >= valid_rows) continue;
    const int64_t out_row = (e.q_begin + row / H) * H + row % H;
    const bool empty = l_run[hr] == 0.f;
    // lse = ln 2 * (m2 + log2 l): natural log, as split_plan.h numerics 3 reports it.
    if (kq == 0 && (lane & 3) == 0)
      args.ws_lse[partial * rows_total + out_row] =
          empty ? -INFINITY : 0.6931471805599453f * (m_run[hr] + log2f(l_run[hr]));
    const float inv = empty ? 0.f : 1.f / l_run[hr];
    float* o = args.ws_o + (partial * rows_total + out_row) * kLatentDim;
#pragma unroll
    for (int c = 0; c < kVChunks; ++c)
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const int col = c * kCols + kq * (kCols / 4) + n * 8 + frag_col;
        *reinterpret_cast<float2*>(o + col) =
            make_float2(acc[c][n][2 * hr] * inv, acc[c][n][2 * hr + 1] * inv);
      }
  }
}

}  // namespace mlaverify::cuda::detail

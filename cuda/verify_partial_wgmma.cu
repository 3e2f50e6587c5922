// Hopper partial kernel (sm_90a only): the same contract, split plan and numerics as the
// mma.sync kernel in verify_kernel.cuh, with the products on wgmma, both operands read by the
// tensor cores straight from shared memory (cuda/NOTES.md v8: the mma.sync kernel is bound by
// its ldmatrix traffic, which wgmma does not have).
//
// Block: 64 (node, head) rows x one split (or the draft block), 256 threads = 2 warpgroups.
// Shared memory holds the Q tile and two whole 64-key KV tiles (Hopper allows 227 KB; sm_120's
// 99 KB does not, which is why this is a separate kernel). Per 64-key tile j:
//   warpgroup 0   O[:, 0..255] = O * scale + P(j) V(j) and S(j+1) = Q K(j+1)^T (36 x m64n64k16)
//                 issued back to back; when PV(j) retires it releases buffer j; when S(j+1)
//                 retires, the online softmax in registers (each warp owns 16 whole rows: no
//                 cross-warp reduction) writes P(j+1) as bf16 and the row factors;
//   warpgroup 1   O[:, 256..511] = O * scale + P(j) V(j) (4 x m64n256k16, V N-major), then the
//                 cp.async gather of tile j+2 into the released buffer.
// The handshakes are mbarriers (see below); cuda/NOTES.md v8..v12 has the measurements.
// Every operand sits in shared memory in the 128-byte swizzle layout: 64-column blocks of
// 64 rows x 128 bytes, 16-byte unit u of row r stored at unit u ^ (r & 7) (the same XOR the
// mma.sync kernel uses for ldmatrix). K-major operands (Q, K, P): SBO = 1024 bytes between
// 8-row groups, LBO unused, k16 steps advance the start address by 32 bytes. V (N-major, keys
// are K): LBO = 8192 bytes between 64-column blocks, SBO = 1024 bytes between 8-key groups.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"
#include "cuda/wgmma_ops.cuh"

namespace mlaverify::cuda::detail {
namespace {

constexpr int kBlockBytes = 64 * 128;                  // 64 rows x 64 bf16 columns
constexpr int kRowBlocks = kRowDim / 64;               // 9: latent 0..7, then k_pe
constexpr int kTileBytes = kRowBlocks * kBlockBytes;   // 73,728: Q tile or one KV tile
constexpr int kOffQ = 0;
constexpr int kOffKv = kTileBytes;                     // two KV tile buffers
constexpr int kOffP = kOffKv + 2 * kTileBytes;         // [64 rows, 64 keys] bf16
constexpr int kOffScale = kOffP + kBlockBytes;         // row rescale factors, fp32 [2][64]
constexpr int kOffInvL = kOffScale + 2 * 64 * 4;       // 1 / l, fp32 [64]
constexpr int kOffVis = kOffInvL + 64 * 4;             // draft visibility, uint64 [2][64]
// mbarriers: tile landed [2], buffer empty [2], P read, P written
constexpr int kOffBar = kOffVis + 2 * 64 * 8;
constexpr int kUsed = kOffBar + 6 * 8;
static_assert(kUsed + 1024 == kWgmmaSmemBytes, "verify_kernel.h: kWgmmaSmemBytes");
static_assert(kRowDim == 576 && kLatentDim == 512, "9 column blocks, V = the 8 latent ones");

// The warpgroups hand work to each other only through mbarriers (arrive; try_wait.parity), one
// per one-way signal: a tile has landed (the loader never waits for its own copies), a buffer may
// be refilled (warpgroup 0 does not wait for warpgroup 1's PV), P and the row factors of a tile
// are written, P has been read. A warpgroup waits only for data it needs, never at a
// rendezvous, and compute-sanitizer racecheck models mbarriers (it does not model one-sided
// bar.arrive handshakes: bench/gpu/racecheck_probe). Each barrier's phases alternate strictly
// between the two sides, so a parity wait can never see a phase two ahead.
// "Tile landed": each loader thread arrives once itself and once more through
// cp.async.mbarrier.arrive.noinc, which fires when all of that thread's earlier cp.async have
// completed.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_on_copies(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
  mbar_arrive(bar);
}
// Waits until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Pins an accumulator after wgmma.wait_group: later reads cannot be hoisted above the wait,
// since to the compiler the register is redefined here.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

}  // namespace

__global__ void __launch_bounds__(kThreads, 1) verify_partial_wgmma(const PartialArgs args) {
  const VerifyParams& p = args.p;
  const int32_t req = blockIdx.y;
  const int32_t split = blockIdx.z;
  const bool is_draft = split == p.num_splits;
  const RequestExtent e = request_extent(p, req);
  const int32_t H = p.num_heads;
  const int64_t valid_rows = static_cast<int64_t>(e.draft_nodes) * H;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  if (row0 >= valid_rows) return;

  int64_t key_begin = 0, key_end = e.draft_nodes;
  if (!is_draft) {
    SplitRange r = split_range(e.prefix_len, p.num_splits, split);
    if (r.empty()) return;
    key_begin = r.begin;
    key_end = r.end;
  }
  // Broadcast from lane 0: the count comes from metadata loads, and wgmma issued under a
  // condition the compiler cannot prove warp-uniform is serialized (ptxas C7520).
  const int num_tiles = __shfl_sync(
      0xffffffffu, static_cast<int>((key_end - key_begin + kKvTile - 1) / kKvTile), 0);

  // The swizzle pattern repeats every 1024 bytes: align the carve-up to that.
  extern __shared__ __align__(128) unsigned char smem_wgmma[];
  const uint32_t raw = smem_addr(smem_wgmma);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_wgmma + (base - raw);
  const uint32_t q_s = base + kOffQ;
  const uint32_t kv_s = base + kOffKv;
  const uint32_t p_s = base + kOffP;
  float* row_scale = reinterpret_cast<float*>(smem + kOffScale);
  float* row_inv_l = reinterpret_cast<float*>(smem + kOffInvL);
  uint64_t* vis_s = reinterpret_cast<uint64_t*>(smem + kOffVis);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  // Warpgroup (0 computes S and the softmax), broadcast from lane 0 so the compiler can see it
  // is warp-uniform: wgmma under a branch it cannot prove uniform gets serialized (C7520).
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int wq = (tid >> 5) & 3;          // warp within the warpgroup: rows wq * 16 ..
  const int frag_row = lane >> 2;         // accumulator rows r0 = wq * 16 + frag_row and r0 + 8
  const int frag_col = (lane & 3) * 2;    // accumulator columns 8 i + frag_col, + 1
  const int r0 = wq * 16 + frag_row;


  // ---- Q tile: 64 rows x 72 units of 16 bytes, rows past the request zero-filled ----
  {
    const __nv_bfloat16* qbase = static_cast<const __nv_bfloat16*>(p.q);
    for (int u = tid; u < kRows * 72; u += kThreads) {
      const int r = u / 72, unit = u % 72;
      const int64_t row = row0 + r;
      const bool ok = row < valid_rows;
      const int64_t t = ok ? row / H : 0, h = ok ? row % H : 0;
      const int64_t col =
          unit < 64 ? p.q_latent_offset + unit * 8 : p.q_rope_offset + (unit - 64) * 8;
      const __nv_bfloat16* src =
          qbase + (e.q_begin + t) * p.q_token_stride + h * p.q_head_stride + col;
      cp_async16(q_s + (unit >> 3) * kBlockBytes + r * 128 + (((unit & 7) ^ (r & 7)) * 16),
                 ok ? src : qbase, ok ? 16 : 0);
    }
    cp_async_commit();
  }

  // ---- KV gather, warpgroup 1 only: thread owns 16-byte unit ld_u of every 64-column block of
  // keys ld_key + 16 kk, kk = 0..3 (8 threads read one 128-byte run of a row: coalesced). Slot
  // ids are loaded one tile ahead, so the dependent index load is in flight while a tile streams.
  const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  const int ld_u = tid & 7;
  const int ld_key = (tid & 127) >> 3;  // 0..15
  const bool slots_from_indices = !(is_draft && p.draft_source == DraftKvSource::ExtendRows);
  const int64_t index_base = e.kv_begin + (is_draft ? e.prefix_len : 0);
  auto load_slot = [&](int tile, int kk) -> int64_t {
    const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + ld_key + 16 * kk;
    return (tile < num_tiles && key < key_end) ? p.kv_indices[index_base + key] : 0;
  };
  int64_t next_slot[4] = {0, 0, 0, 0};
  if (wg == 1 && slots_from_indices) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) next_slot[kk] = load_slot(0, kk);
  }
  // Issues the whole of tile `tile` into buffer tile & 1; past key_end the rows are zero-filled
  // (src-size 0), so stale keys never meet a probability.
  const uint32_t ld_dst = ld_key * 128 + ((ld_u ^ (ld_key & 7)) * 16);  // (+16 kk) & 7 same
  const uint32_t bar_full = base + kOffBar;        // + 8 (tile & 1)
  const uint32_t bar_empty = base + kOffBar + 16;  // + 8 (tile & 1)
  const uint32_t bar_p_read = base + kOffBar + 32;
  const uint32_t bar_p_full = base + kOffBar + 40;
  auto issue_tile = [&](int tile) {
    const uint32_t buf = kv_s + (tile & 1) * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + ld_key + 16 * kk;
      const bool ok = key < key_end;
      const __nv_bfloat16* lat = pool;
      const __nv_bfloat16* rope = pool;
      if (ok && !slots_from_indices) {
        const __nv_bfloat16* row = static_cast<const __nv_bfloat16*>(p.k_extend) +
                                   (e.q_begin + key) * p.k_extend_stride;
        lat = row + ld_u * 8;  // k_extend rows are latent-first
        rope = row + kLatentDim + ld_u * 8;
      } else if (ok) {
        lat = pool + p.kv_layout.latent_index(next_slot[kk]) + ld_u * 8;
        rope = pool + p.kv_layout.rope_index(next_slot[kk]) + ld_u * 8;
      }
      const int bytes = ok ? 16 : 0;
      const uint32_t dst = buf + kk * 16 * 128 + ld_dst;
#pragma unroll
      for (int c = 0; c < 8; ++c) cp_async16(dst + c * kBlockBytes, lat + c * 64, bytes);
      cp_async16(dst + 8 * kBlockBytes, rope, bytes);
    }
    mbar_arrive_on_copies(bar_full + (tile & 1) * 8);
    if (slots_from_indices) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) next_slot[kk] = load_slot(tile + 1, kk);
    }
  };
  // Draft visibility of tile `tile`, one 64-bit word per row into vis_s[tile & 1] (warpgroup 1:
  // two threads per row, 32 keys each).
  auto decode_vis = [&](int tile) {
    const int r = (tid & 127) >> 1, part = tid & 1;
    const int64_t row = row0 + r;
    const int64_t tile_key0 = key_begin + static_cast<int64_t>(tile) * kKvTile;
    uint64_t bits = 0;
    if (row < valid_rows) {
      const int32_t t = static_cast<int32_t>(row / H);
#pragma unroll 4
      for (int k = 0; k < 32; ++k) {
        const int key_local = part * 32 + k;
        const int64_t key = tile_key0 + key_local;
        if (key < key_end && mask_bit(p, req, e, t, static_cast<int32_t>(key)))
          bits |= 1ull << key_local;
      }
    }
    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
    if (part == 0) vis_s[(tile & 1) * kRows + r] = bits;
  };

  // Barriers, and the draft visibility of tiles 0 and 1, before anything waits on them. A later
  // tile's words are written after the "P written" wait of the tile two before (whose softmax
  // last read that half) and published by the "tile landed" arrivals.
  if (tid == 0) {
    mbar_init(bar_full, 2 * 128);  // 128 loader threads x (own arrival + copies-done arrival)
    mbar_init(bar_full + 8, 2 * 128);
    mbar_init(bar_empty, 128);  // warpgroup 0's threads, once its PV of the tile is done
    mbar_init(bar_empty + 8, 128);
    mbar_init(bar_p_read, 128);  // warpgroup 1's threads, once their PV of a tile is done
    mbar_init(bar_p_full, 128);  // warpgroup 0's threads, once P of a tile is written
  }
  if (wg == 1 && is_draft) {
#pragma unroll 1
    for (int t = 0; t < 2 && t < num_tiles; ++t) decode_vis(t);
  }
  __syncthreads();

  float o[128];  // this warpgroup's 64 rows x 256 columns: o[4 i + f], column block i (n8)
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // warpgroup 0: rows r0, r0 + 8, in log2 units
  float l_run[2] = {0.f, 0.f};
  float scale[2] = {1.f, 1.f};  // O rescale for the tile whose P is in p_s
  const float scale_log2 = p.sm_scale * 1.4426950408889634f;

  // Descriptors of the fixed operands; per step only the start address moves (low bits).
  const Desc desc_q = sw128_desc(q_s, 16, 1024);
  const Desc desc_p = sw128_desc(p_s, 16, 1024);

  // O = O * scale + P V over this warpgroup's 256 columns (blocks 4 wg .. 4 wg + 3) of tile j.
  auto issue_pv = [&](int tile) {
    // Once the running maxima settle most tiles leave every row's max unchanged (scale exactly
    // 1): the warp skips the 128 multiplies then, with bit-identical results.
    if (!__all_sync(0xffffffffu, scale[0] == 1.f && scale[1] == 1.f)) {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[i * 4 + 0] *= scale[0];
        o[i * 4 + 1] *= scale[0];
        o[i * 4 + 2] *= scale[1];
        o[i * 4 + 3] *= scale[1];
      }
    }
    const uint32_t buf = kv_s + (tile & 1) * kTileBytes;
    const Desc desc_v = sw128_desc(buf + wg * 4 * kBlockBytes, kBlockBytes, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_m64n256k16_ss(o, desc_at(desc_p, ks * 32), desc_at(desc_v, ks * 16 * 128), 1);
    wgmma_commit();
  };

  // Warpgroup 0: tile `tile` has landed; fence the generic-proxy copies before wgmma reads them.
  auto wait_tile = [&](int tile) {
    mbar_wait(bar_full + (tile & 1) * 8, (tile >> 1) & 1);
    fence_proxy_async();
  };

  if (wg == 0) {
    // ================= warpgroup 0: S, softmax, P; its half of PV =================
    float s[32];
    // S = Q K^T for tile j: 64 rows x 64 keys over 576 columns (36 x m64n64k16), async.
    auto issue_s = [&](int tile) {
      const Desc desc_k = sw128_desc(kv_s + (tile & 1) * kTileBytes, 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int c = 0; c < kRowBlocks; ++c)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint32_t off = c * kBlockBytes + ks * 32;
          wgmma_m64n64k16_ss(s, desc_at(desc_q, off), desc_at(desc_k, off), (c | ks) != 0);
        }
      wgmma_commit();
    };
    // Online softmax of tile j (split_plan.h numerics 2, scores in log2 units as in v4), P to
    // p_s once warpgroup 1 has released it, the rescale factors to row_scale.
    auto softmax = [&](int tile) {
      const int64_t left = key_end - (key_begin + static_cast<int64_t>(tile) * kKvTile);
      const int key_limit = left < kKvTile ? static_cast<int>(left) : kKvTile;
      uint64_t vis[2] = {~0ull, ~0ull};
      if (is_draft) {
        vis[0] = vis_s[(tile & 1) * kRows + r0];
        vis[1] = vis_s[(tile & 1) * kRows + r0 + 8];
      }
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          const int hr = f >> 1;
          const int k = i * 8 + frag_col + (f & 1);
          const bool visible = k < key_limit && ((vis[hr] >> k) & 1ull);
          const float t = visible ? s[i * 4 + f] * scale_log2 : -INFINITY;
          s[i * 4 + f] = t;
          tile_max[hr] = fmaxf(tile_max[hr], t);
        }
      float m_new[2], part_sum[2] = {0.f, 0.f};
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 1));
        tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 2));
        m_new[hr] = fmaxf(m_run[hr], tile_max[hr]);
        // m_new == -inf: nothing visible yet, keep the (zero) state. Otherwise 2^(-inf - x) = 0
        // discards an empty previous state; -inf - -inf never occurs.
        scale[hr] = m_new[hr] == -INFINITY ? 1.f : exp2f(m_run[hr] - m_new[hr]);
      }
      uint32_t pk[8][2];
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const float t0 = s[i * 4 + 2 * hr], t1 = s[i * 4 + 2 * hr + 1];
          // Masked keys: probability exactly 0. l sums the unrounded fp32 values; the tensor
          // cores get them rounded to bf16 (round to nearest even).
          const float p0 = t0 == -INFINITY ? 0.f : exp2f(t0 - m_new[hr]);
          const float p1 = t1 == -INFINITY ? 0.f : exp2f(t1 - m_new[hr]);
          part_sum[hr] += p0 + p1;
          const __nv_bfloat162 v = __floats2bfloat162_rn(p0, p1);
          pk[i][hr] = *reinterpret_cast<const uint32_t*>(&v);
        }
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 1);
        part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 2);
        l_run[hr] = l_run[hr] * scale[hr] + part_sum[hr];
        m_run[hr] = m_new[hr];
      }
      // Warpgroup 1 finished reading P of tile j - 1 (that barrier's (j - 1)-th phase).
      if (tile > 0) mbar_wait(bar_p_read, (tile - 1) & 1);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = r0 + 8 * hr;
          const uint32_t at = p_s + r * 128 + ((i ^ (r & 7)) * 16) + frag_col * 2;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(pk[i][hr]) : "memory");
        }
      if ((lane & 3) == 0) {
        row_scale[(tile & 1) * kRows + r0] = scale[0];
        row_scale[(tile & 1) * kRows + r0 + 8] = scale[1];
      }
      fence_proxy_async();  // P is read by wgmma next
      mbar_arrive(bar_p_full);
    };

    cp_async_wait<0>();  // this warpgroup's part of Q
    wait_tile(0);         // tile 0 and the rest of Q
    issue_s(0);
    wgmma_wait<0>();
    fence_regs(s);
    softmax(0);
#pragma unroll 1
    for (int tile = 0; tile < num_tiles; ++tile) {
      // This tile's PV, then the next tile's S, back to back on the tensor cores. PV completes
      // first (groups retire in order): the buffer is released while S still runs, so the
      // gather of tile j + 2 overlaps S of j + 1 and the softmax.
      const bool more = tile + 1 < num_tiles;
      issue_pv(tile);
      if (more) {
        wait_tile(tile + 1);
        issue_s(tile + 1);
        wgmma_wait<1>();
      } else {
        wgmma_wait<0>();
      }
      fence_regs(o);
      if (tile + 2 < num_tiles) mbar_arrive(bar_empty + (tile & 1) * 8);  // done with its buffer
      if (more) {
        wgmma_wait<0>();
        fence_regs(s);
        softmax(tile + 1);
      }
    }
  } else {
    // ================= warpgroup 1: the gather; its half of PV =================
    // It never waits for its own copies: each tile's landing is tracked on the mbarrier.
    issue_tile(0);
    if (num_tiles > 1) issue_tile(1);
#pragma unroll 1
    for (int tile = 0; tile < num_tiles; ++tile) {
      mbar_wait(bar_p_full, tile & 1);
      // Factors by tile parity: the next write to this half (tile j + 2) waits for this
      // warpgroup's "P read" of tile j + 1, which comes after these reads.
      scale[0] = row_scale[(tile & 1) * kRows + r0];
      scale[1] = row_scale[(tile & 1) * kRows + r0 + 8];
      issue_pv(tile);
      wgmma_wait<0>();
      fence_regs(o);
      if (tile + 1 < num_tiles) mbar_arrive(bar_p_read);
      if (tile + 2 < num_tiles) {
        mbar_wait(bar_empty + (tile & 1) * 8, (tile >> 1) & 1);  // warpgroup 0 is done with it too
        if (is_draft) decode_vis(tile + 2);
        issue_tile(tile + 2);
      }
    }
  }

  // ---- write the normalized partial (split_plan.h numerics 3) ----
  const int64_t partial = split;
  const int64_t rows_total = p.max_total_q * H;
  if (wg == 0 && (lane & 3) == 0) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      store_row_totals(args, partial, e, row0, valid_rows, r0 + 8 * hr, l_run[hr], m_run[hr],
                       row_inv_l);
  }
  __syncthreads();
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = r0 + 8 * hr;
    const int64_t row = row0 + r;
    if (row >= valid_rows) continue;
    const int64_t out_row = (e.q_begin + row / H) * H + row % H;
    const float inv = row_inv_l[r];
    float* out = args.ws_o + (partial * rows_total + out_row) * kLatentDim + wg * 256;
#pragma unroll
    for (int i = 0; i < 32; ++i)
      *reinterpret_cast<float2*>(out + i * 8 + frag_col) =
          make_float2(o[i * 4 + 2 * hr] * inv, o[i * 4 + 2 * hr + 1] * inv);
  }
}

void prepare_partial_wgmma() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kWgmmaSmemBytes));
}

void launch_partial_wgmma(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  verify_partial_wgmma<<<grid, kThreads, kWgmmaSmemBytes, stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

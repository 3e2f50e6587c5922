// Hopper partial kernel (sm_90a only): the same contract, split plan and numerics as the
// mma.sync kernel in verify_kernel.cuh, with the products on wgmma, both operands read by the
// tensor cores straight from shared memory (cuda/NOTES.md v8: the mma.sync kernel is bound by
// its ldmatrix traffic, which wgmma does not have).
//
// Block: 64 (node, head) rows x one split (or the draft block), 256 threads = 2 warpgroups.
// Shared memory holds the Q tile and two whole 64-key KV tiles (Hopper allows 227 KB; sm_120's
// 99 KB does not, which is why this is a separate kernel). Per 64-key tile:
//   all threads      wait for tile j, fence it to the async proxy, barrier, then start the
//                    gather of tile j + 1 into the other buffer (one tile of prefetch);
//   warpgroup 0      S = Q K^T (36 x m64n64k16), online softmax in registers (each warp owns
//                    16 whole rows: no cross-warp reduction), P as bf16 to shared memory;
//   barrier;
//   warpgroup w      O[:, 256 w .. 256 w + 255] = O * scale + P V (4 x m64n256k16, V N-major).
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
constexpr int kOffScale = kOffP + kBlockBytes;         // row rescale factors, fp32 [64]
constexpr int kOffInvL = kOffScale + 64 * 4;           // 1 / l, fp32 [64]
constexpr int kOffVis = kOffInvL + 64 * 4;             // draft visibility, uint64 [2][64]
constexpr int kOffBar = kOffVis + 2 * 64 * 8;           // mbarriers: full[2], empty[2]
constexpr int kUsed = kOffBar + 4 * 8;
static_assert(kUsed + 1024 == kWgmmaSmemBytes, "verify_kernel.h: kWgmmaSmemBytes");
static_assert(kRowDim == 576 && kLatentDim == 512, "9 column blocks, V = the 8 latent ones");

// Matrix descriptor, 128-byte swizzle (PTX ISA, "Matrix Descriptor Format"): start address,
// leading and stride byte offsets, each >> 4 in 14 bits; base offset 0 (every block starts on a
// 1024-byte boundary, and the 32-byte k-step offsets stay inside the first 128-byte row).
// Kept as two 32-bit halves: a step moves only the start address, in the low half.
struct Desc {
  uint32_t lo, hi;
};
__device__ __forceinline__ Desc sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return {((addr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16),
          ((sbo & 0x3FFFF) >> 4) | (1u << 30)};
}
// The descriptor `byte_offset` further on. The low half passes through an empty asm first, so
// the compiler cannot hoist dozens of loop-invariant 64-bit descriptors into registers (it did,
// and spilled).
__device__ __forceinline__ uint64_t desc_at(Desc d, uint32_t byte_offset) {
  uint32_t lo = d.lo;
  asm volatile("" : "+r"(lo));
  uint64_t out;
  asm("mov.b64 %0, {%1, %2};" : "=l"(out) : "r"(lo + (byte_offset >> 4)), "r"(d.hi));
  return out;
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy shared-memory writes (cp.async, st.shared) made visible to the async proxy that
// wgmma reads through; each writing thread fences, then a barrier orders it before the reads.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Named barriers between the two warpgroups (0 is __syncthreads). Each is a one-way signal:
// one warpgroup arrives (does not wait), the other syncs; 256 threads complete it. The protocol
// never lets a warpgroup arrive twice at one barrier before the other side has synced it (the
// "full" signal has one barrier per buffer parity for that reason): see the loops below.
constexpr int kBarKvFull0 = 1;  // warpgroup 1 -> 0: KV tile of parity 0 (+ 1) has landed
constexpr int kBarKvEmpty = 3;  // 0 -> 1: warpgroup 0's PV is done with a KV buffer
constexpr int kBarPFull = 4;    // 0 -> 1: P and the row factors of a tile are in smem
constexpr int kBarPEmpty = 5;   // 1 -> 0: warpgroup 1 is done reading P
__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}
constexpr int kBarLoader = 6;   // warpgroup 1 alone (128 threads): its half of a tile landed

// ---- cluster pairs (verify_partial_wgmma<true>): two CTAs of one request and split, adjacent
// row tiles, gather half of every KV tile each and push it into the other's shared memory ----
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// All threads of both CTAs; orders mbarrier initialization before any remote use, and keeps a
// CTA's shared memory alive until the other has finished with it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
// The shared::cluster address of `addr` (a shared::cta address) in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t addr, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrive on this CTA's barrier and expect `bytes` more from the other CTA's bulk copy.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive_local(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrive on a barrier of the other CTA (`bar` from map_to_rank), releasing at cluster scope.
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar)
               : "memory");
}
// Waits until the phase with parity `parity` of this CTA's barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// Bulk copy of `bytes` from this CTA's shared memory to the other CTA's (`dst`, `bar` from
// map_to_rank); completion is counted in bytes on that CTA's barrier.
__device__ __forceinline__ void bulk_copy_to_peer(uint32_t dst, uint32_t src, uint32_t bytes,
                                                  uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst),
      "r"(src), "r"(bytes), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void bar_sync_loader() {
  asm volatile("bar.sync %0, 128;\n" ::"n"(kBarLoader) : "memory");
}

// Pins an accumulator after wgmma.wait_group: later reads cannot be hoisted above the wait,
// since to the compiler the register is redefined here.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

}  // namespace

// kPair: launched in clusters of 2 CTAs along x (adjacent row tiles of one request and split).
// Each CTA gathers 32 of a tile's 64 keys and bulk-copies them into the other's buffer, so every
// KV byte crosses from L2 once per pair instead of once per CTA (NOTES.md v10).
template <bool kPair>
__global__ void __launch_bounds__(kThreads, 1) verify_partial_wgmma(const PartialArgs args) {
  const VerifyParams& p = args.p;
  const int32_t req = blockIdx.y;
  const int32_t split = blockIdx.z;
  const bool is_draft = split == p.num_splits;
  const RequestExtent e = request_extent(p, req);
  const int32_t H = p.num_heads;
  const int64_t valid_rows = static_cast<int64_t>(e.draft_nodes) * H;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  // A pair leaves together or not at all: the second CTA of a pair whose first has rows runs
  // the whole pipeline on zero rows (its partner needs its half of every tile) and writes
  // nothing. Both CTAs see the same split, so the empty-split exit below is common too.
  const int64_t first_row0 = kPair ? static_cast<int64_t>(blockIdx.x & ~1u) * kRows : row0;
  if (first_row0 >= valid_rows) return;

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
  // keys key_off + ld_key + 16 kk (8 threads read one 128-byte run of a row: coalesced): all 64
  // keys (kk = 0..3) alone, or in a pair this CTA's 32 (kk = 0, 1; key_off = 32 * rank). Slot ids
  // are loaded one tile ahead, so the dependent index load is in flight while a tile streams.
  constexpr int kKK = kPair ? 2 : 4;
  const uint32_t rank = kPair ? cluster_rank() : 0;
  const int key_off = static_cast<int>(rank) * 32;
  const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  const int ld_u = tid & 7;
  const int ld_key = (tid & 127) >> 3;  // 0..15
  const bool slots_from_indices = !(is_draft && p.draft_source == DraftKvSource::ExtendRows);
  const int64_t index_base = e.kv_begin + (is_draft ? e.prefix_len : 0);
  auto load_slot = [&](int tile, int kk) -> int64_t {
    const int64_t key =
        key_begin + static_cast<int64_t>(tile) * kKvTile + key_off + ld_key + 16 * kk;
    return (tile < num_tiles && key < key_end) ? p.kv_indices[index_base + key] : 0;
  };
  int64_t next_slot[kKK] = {};
  if (wg == 1 && slots_from_indices) {
#pragma unroll
    for (int kk = 0; kk < kKK; ++kk) next_slot[kk] = load_slot(0, kk);
  }
  // Issues this CTA's keys of tile `tile` into buffer tile & 1; past key_end the rows are
  // zero-filled (src-size 0), so stale keys never meet a probability.
  const uint32_t ld_dst = (key_off + ld_key) * 128 + ((ld_u ^ (ld_key & 7)) * 16);  // +16 kk same
  auto issue_tile = [&](int tile) {
    const uint32_t buf = kv_s + (tile & 1) * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kKK; ++kk) {
      const int64_t key =
          key_begin + static_cast<int64_t>(tile) * kKvTile + key_off + ld_key + 16 * kk;
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
    cp_async_commit();
    if (slots_from_indices) {
#pragma unroll
      for (int kk = 0; kk < kKK; ++kk) next_slot[kk] = load_slot(tile + 1, kk);
    }
  };
  // Pair barriers: full[b] completes when this CTA's half of the tile in buffer b has landed
  // (one local arrival) and the other CTA's half has been copied in (36,864 bytes of
  // transactions); empty[b] when both CTAs are done with their buffer b (one local, one remote
  // arrival), so either may then refill its own and the other's.
  const uint32_t bar_full = base + kOffBar;       // + 8 b
  const uint32_t bar_empty = base + kOffBar + 16;  // + 8 b
  constexpr uint32_t kHalfBytes = kRowBlocks * 32 * 128;  // 36,864
  if constexpr (kPair) {
    if (tid == 0) {
      mbar_init(bar_full, 1);
      mbar_init(bar_full + 8, 1);
      mbar_init(bar_empty, 2);
      mbar_init(bar_empty + 8, 2);
      mbar_init_fence();
    }
    cluster_sync();
  }
  // Tile `tile` of this CTA has landed (every warpgroup-1 thread waited for its own copies and
  // fenced them): signal warpgroup 0, and in a pair push this CTA's half to the other CTA.
  auto publish_tile = [&](int tile) {
    fence_proxy_async();
    if constexpr (kPair) {
      bar_sync_loader();
      if (tid == 128) {
        const uint32_t b = (tile & 1) * 8;
        const uint32_t peer = rank ^ 1u;
        const uint32_t src = kv_s + (tile & 1) * kTileBytes + key_off * 128;
        const uint32_t dst = map_to_rank(src, peer);
        const uint32_t peer_full = map_to_rank(bar_full + b, peer);
#pragma unroll
        for (int c = 0; c < kRowBlocks; ++c)
          bulk_copy_to_peer(dst + c * kBlockBytes, src + c * kBlockBytes, 32 * 128, peer_full);
        mbar_arrive_expect_tx(bar_full + b, kHalfBytes);
      }
    } else {
      bar_arrive(kBarKvFull0 + (tile & 1));
    }
  };
  // Warpgroup 0: wait until tile `tile` is whole in this CTA's buffer.
  auto wait_tile = [&](int tile) {
    if constexpr (kPair)
      mbar_wait(bar_full + (tile & 1) * 8, (tile >> 1) & 1);
    else
      bar_sync(kBarKvFull0 + (tile & 1));
  };
  // Warpgroup 1, after the local KV_EMPTY handshake for tile `tile`: may buffer tile & 1 be
  // refilled (in a pair: is the other CTA done with its buffer too)?
  auto wait_refill = [&](int tile) {
    if constexpr (kPair) {
      const uint32_t b = (tile & 1) * 8;
      if (tid == 128) {
        mbar_arrive_local(bar_empty + b);
        mbar_arrive_remote(map_to_rank(bar_empty + b, rank ^ 1u));
      }
      mbar_wait(bar_empty + b, (tile >> 1) & 1);
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
      if (tile > 0) bar_sync(kBarPEmpty);  // warpgroup 1 finished reading P of tile j - 1
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = r0 + 8 * hr;
          const uint32_t at = p_s + r * 128 + ((i ^ (r & 7)) * 16) + frag_col * 2;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(pk[i][hr]) : "memory");
        }
      if ((lane & 3) == 0) {
        row_scale[r0] = scale[0];
        row_scale[r0 + 8] = scale[1];
      }
      fence_proxy_async();  // P is read by wgmma next
      bar_arrive(kBarPFull);
    };

    cp_async_wait<0>();  // this warpgroup's part of Q
    fence_proxy_async();
    wait_tile(0);  // tile 0 and the rest of Q
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
      if (tile + 2 < num_tiles) bar_arrive(kBarKvEmpty);  // done with tile j's buffer
      if (more) {
        wgmma_wait<0>();
        fence_regs(s);
        softmax(tile + 1);
      }
    }
  } else {
    // ================= warpgroup 1: the gather; its half of PV =================
    issue_tile(0);
    if (num_tiles > 1) issue_tile(1);
    if (is_draft) decode_vis(0);
    if (num_tiles > 1)
      cp_async_wait<1>();  // Q's and tile 0's groups
    else
      cp_async_wait<0>();
    publish_tile(0);
#pragma unroll 1
    for (int tile = 0; tile < num_tiles; ++tile) {
      // Tile j + 1 (issued an iteration ago) has landed -> tell warpgroup 0, which issues its S
      // right after this tile's PV. (Waiting for it after P of tile j instead measured 2-5%
      // slower: warpgroup 0 then waits on this warpgroup's wake-up every tile; NOTES.md v9.)
      if (tile + 1 < num_tiles) {
        cp_async_wait<0>();
        if (is_draft) decode_vis(tile + 1);
        publish_tile(tile + 1);
      }
      bar_sync(kBarPFull);
      scale[0] = row_scale[r0];
      scale[1] = row_scale[r0 + 8];
      issue_pv(tile);
      wgmma_wait<0>();
      fence_regs(o);
      if (tile + 1 < num_tiles) bar_arrive(kBarPEmpty);
      if (tile + 2 < num_tiles) {
        bar_sync(kBarKvEmpty);
        wait_refill(tile);
        issue_tile(tile + 2);
      }
    }
  }

  // ---- write the normalized partial (split_plan.h numerics 3) ----
  const int64_t partial = split;
  const int64_t rows_total = p.max_total_q * H;
  if (wg == 0 && (lane & 3) == 0) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = r0 + 8 * hr;
      const bool empty = l_run[hr] == 0.f;
      row_inv_l[r] = empty ? 0.f : 1.f / l_run[hr];
      const int64_t row = row0 + r;
      if (row < valid_rows)
        args.ws_lse[partial * rows_total + (e.q_begin + row / H) * H + row % H] =
            empty ? -INFINITY : 0.6931471805599453f * (m_run[hr] + log2f(l_run[hr]));
    }
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
  // In a pair, neither CTA leaves while the other may still copy into or read its memory.
  if constexpr (kPair) cluster_sync();
}

void prepare_partial_wgmma() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_wgmma<false>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, kWgmmaSmemBytes));
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_wgmma<true>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, kWgmmaSmemBytes));
}

int max_active_wgmma_pairs() {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(2, 1, 1);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kWgmmaSmemBytes;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, verify_partial_wgmma<true>, &config));
  return clusters;
}

void launch_partial_wgmma(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  const unsigned tiles = static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads));
  const dim3 block(kThreads);
  if (tiles == 1) {  // nothing to share: one CTA per (request, split)
    dim3 grid(1, static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
    verify_partial_wgmma<false><<<grid, block, kWgmmaSmemBytes, stream>>>(args);
    CUDA_CHECK(cudaGetLastError());
    return;
  }
  // Pairs of adjacent row tiles share each KV tile: clusters of 2 along x (x rounded up to even;
  // the extra CTA of an odd count runs on zero rows for its partner and writes nothing).
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((tiles + 1) & ~1u, static_cast<unsigned>(p.batch_size),
                        static_cast<unsigned>(p.num_splits + 1));
  config.blockDim = block;
  config.dynamicSmemBytes = kWgmmaSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, verify_partial_wgmma<true>, args));
}

}  // namespace mlaverify::cuda::detail

// Hopper partial kernel (sm_90a only): the same contract, split plan and numerics as the
// mma.sync kernel in verify_kernel.cuh, with the products on wgmma (cuda/NOTES.md v8: the
// mma.sync kernel is bound by its ldmatrix traffic, which wgmma does not have).
//
// Block: 64 (node, head) rows x one split (or the draft block), 256 threads = 2 warpgroups.
// Shared memory holds three whole 64-key KV tiles and Q's rope block (the latent part of Q
// lives in registers), so nothing is re-read per tile but the KV tile itself. Per tile j:
//   warpgroup 0   S(j) = Q K(j)^T: the 512 latent columns of Q as the register A operand (wgmma
//                 RS, loaded once, 128 registers), the 64 rope columns from smem (32 RS + 4 SS
//                 m64n64k16); then its PV of tile j-1 (O columns 0..127, m64n128k16) queued
//                 behind S; then the online softmax of j in registers (each warp owns 16 whole
//                 rows), P(j) as bf16 into the rope block of tile j's own buffer, which S(j) no
//                 longer needs;
//   warpgroup 1   the cp.async gather of tile j+1 into the buffer tile j-2 used, issued while
//                 S(j) runs, two tiles ahead of its use; then, once S(j) has retired, its PV of
//                 tile j-1 (O columns 128..511, 2 x m64n192k16).
// Both PV halves thus run on the tensor cores under the softmax of the next tile. The
// handshakes are mbarriers (see below); cuda/NOTES.md v8..v13 has the measurements, and why
// this split of O (Q and a 128-column O slice in one warpgroup, 255 registers; three
// warpgroups with setmaxnreg do not fit the register file).
// Every operand sits in shared memory in the 128-byte swizzle layout: 64-column blocks of
// 64 rows x 128 bytes, 16-byte unit u of row r stored at unit u ^ (r & 7) (the same XOR the
// mma.sync kernel uses for ldmatrix). K-major operands (Q rope, K, P): SBO = 1024 bytes between
// 8-row groups, LBO unused, k16 steps advance the start address by 32 bytes. V (N-major, keys
// are K): LBO = 8192 bytes between 64-column blocks, SBO = 1024 bytes between 8-key groups.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"
#include "cuda/wgmma_ops.cuh"

#ifdef MLAV_WGMMA_TRACE
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#endif

namespace mlaverify::cuda::detail {

#ifdef MLAV_WGMMA_TRACE
// Timing-only builds (never the kernel; PTX without the flag is unchanged):
//   scripts/variant_bench.sh trace cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_TRACE
// stages .device/verify_bench_trace, which prints, after each workload (from the next
// workload's initialize, on the host: a printf in the kernel makes ptxas serialize the wgmma,
// C7510), every block's globaltimer at its start, warpgroup 0's loop start and end, its end and
// its SM, for the 31st launch since the previous print (the last workload's at exit).
// scripts/trace_summary.py condenses that per split. cuda/NOTES.md v14 has what it found.
// kTraceSync / kTraceMerged: the cluster merge's first barrier passed, its rows merged.
// kTraceWork / kTraceQStaged / kTraceTile0 split the prologue (cuda/NOTES.md v45).
enum TraceField {
  kTraceStart,
  kTraceLoop,
  kTraceLoopEnd,
  kTraceSync,
  kTraceMerged,
  kTraceWork,     // warpgroup 0 has its block's work (metadata loaded), before Q's copies
  kTraceQStaged,  // Q's copies landed in shared memory
  kTraceTile0,    // tile 0 landed (warpgroup 0's first wait passed)
  kTracePvDone,   // warpgroup 1's last PV retired (recorded by its first thread)
  kTraceStored,   // warpgroup 0's partial stores issued (the merge-kernel path)
  kTraceEnd,
  kTraceSm,
  kTraceFields
};
constexpr unsigned kTraceLaunch = 30;
constexpr unsigned kTraceBlocks = 4096;
__device__ unsigned long long g_trace[kTraceBlocks][kTraceFields];
__device__ unsigned g_trace_tickets;
__device__ unsigned g_trace_grid[3];
__device__ __forceinline__ unsigned long long trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned trace_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// Thread `who` (0: warpgroup 0's first) records a point until the traced launch has sealed this
// block's record.
__device__ __forceinline__ void trace_point(TraceField f, unsigned who = 0) {
  const unsigned b = trace_block();
  if (threadIdx.x == who && b < kTraceBlocks && g_trace[b][kTraceEnd] == 0)
    g_trace[b][f] = trace_now();
}
#define MLAV_TRACE(field) trace_point(field)
#define MLAV_TRACE_WG1(field) trace_point(field, 128)
#else
#define MLAV_TRACE(field) ((void)0)
#define MLAV_TRACE_WG1(field) ((void)0)
#endif

namespace {

static_assert(kThreads == 256, "2 warpgroups: S and softmax, the gather");
constexpr int kBlockBytes = 64 * 128;                  // 64 rows x 64 bf16 columns
constexpr int kRowBlocks = kRowDim / 64;               // 9: latent 0..7, then k_pe
constexpr int kTileBytes = kRowBlocks * kBlockBytes;   // 73,728: one KV tile
constexpr int kBufs = 3;
constexpr int kOffKv = 0;                              // three KV tile buffers
constexpr int kOffQRope = kOffKv + kBufs * kTileBytes; // Q's rope block [64 rows, 64 cols]
constexpr int kOffScale = kOffQRope + kBlockBytes;     // row rescale factors, fp32 [3][64]
constexpr int kOffInvL = kOffScale + kBufs * 64 * 4;   // 1 / l, fp32 [64]
constexpr int kOffVis = kOffInvL + 64 * 4;             // draft visibility, uint64 [3][64]
// mbarriers: tile landed [3], P written [3], buffer empty [3], S done [3]
constexpr int kOffBar = kOffVis + kBufs * 64 * 8;
// then Q staged and Q loaded (warpgroup 0's prologue: see math_warpgroup)
// The balanced plan's unit of the block (request, row tile, split, its request's split count),
// read from the plan once and kept here for block_work's later calls (block_work_first).
constexpr int kOffUnit = kOffBar + (4 * kBufs + 2) * 8;
constexpr int kUsed = kOffUnit + 4 * 4;
static_assert(kUsed == kWgmmaSmemBytes, "verify_kernel.h: kWgmmaSmemBytes");
static_assert(kRowDim == 576 && kLatentDim == 512, "9 column blocks, V = the 8 latent ones");
// O's columns: warpgroup 0 (which also holds Q in registers) accumulates the first kCols0,
// warpgroup 1 (which also gathers) the rest, as two accumulators of kCols1 columns.
constexpr int kCols0 = 128;
constexpr int kCols1 = (kLatentDim - kCols0) / 2;
static_assert(kCols0 % 64 == 0 && kCols1 % 64 == 0, "whole V blocks");

// Cluster merge (PartialArgs::cluster_merge): after the main loop the three KV buffers hold the
// block's normalized partial, fp32 [64 rows][512], row r at kStashRowBytes r, its 16-byte unit
// u at unit u ^ 2 (r & 7) (the fragment stores of 8 rows x 32 bytes hit distinct banks, a
// warp's row read of 512 contiguous bytes too), then the rows' lse [64].
constexpr int kStashRowBytes = kLatentDim * 4;
constexpr int kOffStashLse = kRows * kStashRowBytes;
static_assert(kOffStashLse + kRows * 4 <= kBufs * kTileBytes, "the stash fits the KV buffers");

// The warpgroups hand work to each other only through mbarriers (arrive; try_wait.parity), one
// per one-way signal and buffer: a tile has landed (the loader never waits for its own
// copies), S of a tile has retired (warpgroup 1 queues its PV behind it), P and the row
// factors of a tile are written, both warpgroups' PVs of a tile have retired (its buffer may
// be refilled). A warpgroup waits only for data it needs, and compute-sanitizer racecheck
// models mbarriers (it does not model one-sided bar.arrive handshakes:
// bench/gpu/racecheck_probe). Tile j uses buffer j % 3 for the (j / 3)-th time, so its waits
// are for parity (j / 3) & 1. No side can complete a barrier's phase twice before the other
// side has waited for the first: the next use of a buffer needs "landed" for tile j + 3, which
// needs "empty" for tile j, which comes after every wait of tile j's phases. Arrivals match
// waits tile by tile ("S done" is signalled for tile 0 too, though nobody waits for it: a
// skipped arrival would shift that buffer's phases and deadlock, as measured once).
// "Tile landed": each loader thread arrives once itself and once more through
// cp.async.mbarrier.arrive.noinc, which fires when all of that thread's earlier cp.async have
// completed.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives once this thread's earlier cp.async have completed (counted in the barrier's 256).
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_on_copies(uint32_t bar) {
  cp_async_arrive_noinc(bar);
  mbar_arrive(bar);
}
// All threads of the block (named barrier 1; __syncthreads is barrier 0).
__device__ __forceinline__ void sync_all_warpgroups() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
}

// Every thread of every block of the cluster; writes to shared memory before it are visible to
// the cluster's reads after it (release / acquire at cluster scope).
__device__ __forceinline__ void sync_cluster() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
// The shared::cluster address of shared::cta address `addr` in the cluster's block `rank`.
__device__ __forceinline__ uint32_t cluster_addr(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ float4 ld_cluster_f32x4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}


// Stores four 8x8 bf16 matrices: lanes 8 m .. 8 m + 7 give the row addresses of matrix m,
// register m of each lane holds its two elements of matrix m (row lane / 4, columns 2 (lane % 4)).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// Pins an accumulator after wgmma.wait_group: later reads cannot be hoisted above the wait,
// since to the compiler the register is redefined here.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// The block's rows and keys, draft tiles first, then prefix tiles: split `split` (block_unit:
// blockIdx.z, or the balanced plan's unit) of the folded plan (split_plan.h), or, unfolded,
// prefix split `split` or the draft alone (split == num_splits). Recomputed where needed rather than kept live across the main loops, where every
// register counts (warpgroup 0 uses all 255).
struct BlockWork {
  int32_t req, split;  // the block's request and split (block_unit: the grid's, or the plan's)
  RequestExtent e;
  int64_t row0, valid_rows;  // first (node, head) row of the block; rows of the request
  FoldedRange keys;
  int draft_tiles, num_tiles;
};
extern __shared__ __align__(1024) unsigned char smem_wgmma[];
// first: the kernel's first call, which reads the balanced plan's unit from global memory
// (block_unit) and leaves it in shared memory (published by the kernel's first barrier); every
// later call reads it there instead of five more dependent L2 loads (measured neutral on the
// SPEC workloads, cuda/NOTES.md v17; kept as the cheaper path).
__device__ __forceinline__ BlockWork block_work(const PartialArgs& args, bool first = false) {
  const VerifyParams& p = args.p;
  BlockWork w;
  BlockUnit u;
  int32_t n;
  volatile int32_t* cache = reinterpret_cast<volatile int32_t*>(smem_wgmma + kOffUnit);
  if (args.plan == nullptr || first) {
    u = block_unit(args);
    n = u.valid ? plan_splits(args, u.req) : 0;
    if (args.plan != nullptr && threadIdx.x == 0)
      cache[0] = u.req, cache[1] = u.row_tile, cache[2] = u.split, cache[3] = n;
  } else {
    u = {cache[0], cache[1], cache[2], true};
    n = cache[3];
  }
  w.req = u.req;
  w.split = u.split;
  w.e = request_extent(p, u.req);
  // A block past the balanced plan's units has no rows (the caller's row test exits).
  w.valid_rows = u.valid ? static_cast<int64_t>(w.e.draft_nodes) * p.num_heads : 0;
  w.row0 = static_cast<int64_t>(u.row_tile) * kRows;
  const int32_t split = u.split;
  if (args.folded) {
    w.keys = folded_range(w.e.prefix_len, w.e.draft_nodes, n, split);
  } else if (split == p.num_splits) {
    w.keys = {0, w.e.draft_nodes, 0, 0};
  } else {
    const SplitRange r = split_range(w.e.prefix_len, n, split);
    w.keys = {0, 0, r.begin, r.end};
  }
  w.draft_tiles = static_cast<int>(ceil_div(w.keys.draft_keys(), kKvTile));
  w.num_tiles = w.draft_tiles + static_cast<int>(ceil_div(w.keys.prefix_keys(), kKvTile));
  return w;
}

// Shared-memory addresses: the dynamic window's address is a link-time constant, so these cost
// no registers.
__device__ __forceinline__ uint32_t smem_base() { return smem_addr(smem_wgmma); }
__device__ __forceinline__ uint32_t kv_buf(int b) { return smem_base() + kOffKv + b * kTileBytes; }
__device__ __forceinline__ uint32_t bar_full(int b) { return smem_base() + kOffBar + 8 * b; }
__device__ __forceinline__ uint32_t bar_p_full(int b) {
  return smem_base() + kOffBar + 8 * (kBufs + b);
}
__device__ __forceinline__ uint32_t bar_empty(int b) {
  return smem_base() + kOffBar + 8 * (2 * kBufs + b);
}
__device__ __forceinline__ uint32_t bar_s_done(int b) {
  return smem_base() + kOffBar + 8 * (3 * kBufs + b);
}
// Warpgroup 0's Q is in buffer 2 (each thread's copies done), then in its registers (buffer 2
// free for tile 2): one-way signals, so warpgroup 1's prologue (the draft visibility decode)
// never holds up warpgroup 0's.
__device__ __forceinline__ uint32_t bar_q_staged() { return smem_base() + kOffBar + 8 * 4 * kBufs; }
__device__ __forceinline__ uint32_t bar_q_loaded() {
  return smem_base() + kOffBar + 8 * (4 * kBufs + 1);
}
__device__ __forceinline__ float* row_scale(int b) {
  return reinterpret_cast<float*>(smem_wgmma + kOffScale) + b * kRows;
}
__device__ __forceinline__ float* row_inv_l() {
  return reinterpret_cast<float*>(smem_wgmma + kOffInvL);
}
__device__ __forceinline__ uint64_t* vis_words(int b) {
  return reinterpret_cast<uint64_t*>(smem_wgmma + kOffVis) + b * kRows;
}

// O += P(tile) V(tile) over columns [kCol0, kCol0 + N) of the tile in buffer b (the caller has
// rescaled O): 4 k16 steps over the tile's 64 keys, P from the tile's rope block, V N-major.
template <int N, int kCol0>
__device__ __forceinline__ void issue_pv(float (&o)[N / 2], int b) {
  static_assert((N == kCols0 || N == kCols1) && kCols0 == 128 && kCols1 == 192,
                "the two O slices this kernel accumulates");
  const uint32_t buf = kv_buf(b);
  const Desc desc_p = sw128_desc(buf + 8 * kBlockBytes, 16, 1024);
  const Desc desc_v = sw128_desc(buf + (kCol0 / 64) * kBlockBytes, kBlockBytes, 1024);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    if constexpr (N == 128)
      wgmma_m64n128k16_ss(o, desc_at(desc_p, ks * 32), desc_at(desc_v, ks * 16 * 128), 1);
    else
      wgmma_m64n192k16_ss(o, desc_at(desc_p, ks * 32), desc_at(desc_v, ks * 16 * 128), 1);
  }
  wgmma_commit();
}

// Multiplies rows r0 (o[4 i], o[4 i + 1]) and r0 + 8 (o[4 i + 2], o[4 i + 3]) by their factors.
// Once the running maxima settle most tiles leave every row's max unchanged (scale exactly 1):
// the warp skips the multiplies then, with bit-identical results.
template <int R>
__device__ __forceinline__ void rescale_rows(float (&o)[R], float scale0, float scale1) {
  if (__all_sync(0xffffffffu, scale0 == 1.f && scale1 == 1.f)) return;
#pragma unroll
  for (int i = 0; i < R / 4; ++i) {
    o[i * 4 + 0] *= scale0;
    o[i * 4 + 1] *= scale0;
    o[i * 4 + 2] *= scale1;
    o[i * 4 + 3] *= scale1;
  }
}

// Writes this thread's rows of O / l, columns col0 + 8 i + frag_col, + 1, to the partial.
template <int R>
__device__ __forceinline__ void store_partial(const PartialArgs& args, const float (&o)[R],
                                              int col0) {
  const VerifyParams& p = args.p;
  const int lane = threadIdx.x & 31;
  const int frag_col = (lane & 3) * 2;
  const int r0 = ((threadIdx.x >> 5) & 3) * 16 + (lane >> 2);
  const BlockWork w = block_work(args);
  const int64_t rows_total = p.max_total_q * p.num_heads;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = r0 + 8 * hr;
    const int64_t row = w.row0 + r;
    if (row >= w.valid_rows) continue;
    const int64_t out_row = (w.e.q_begin + row / p.num_heads) * p.num_heads + row % p.num_heads;
    const float inv = row_inv_l()[r];
    float* out = args.ws_o + (int64_t{w.split} * rows_total + out_row) * kLatentDim + col0;
#pragma unroll
    for (int i = 0; i < R / 4; ++i)
      *reinterpret_cast<float2*>(out + i * 8 + frag_col) =
          make_float2(o[i * 4 + 2 * hr] * inv, o[i * 4 + 2 * hr + 1] * inv);
  }
}

// Cluster merge: writes this thread's rows of O / l, columns col0 + 8 i + frag_col, + 1, to the
// block's stash (the values store_partial would write to the workspace).
__device__ __forceinline__ uint32_t stash_unit(int r, int unit) {
  return kv_buf(0) + r * kStashRowBytes + ((unit ^ ((r & 7) << 1)) * 16);
}
template <int R>
__device__ __forceinline__ void stash_partial(const float (&o)[R], int col0) {
  const int lane = threadIdx.x & 31;
  const int frag_col = (lane & 3) * 2;
  const int r0 = ((threadIdx.x >> 5) & 3) * 16 + (lane >> 2);
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = r0 + 8 * hr;
    const float inv = row_inv_l()[r];
#pragma unroll
    for (int i = 0; i < R / 4; ++i) {
      const int col = col0 + i * 8 + frag_col;
      const uint32_t addr = stash_unit(r, col >> 2) + (col & 3) * 4;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr),
                   "f"(o[i * 4 + 2 * hr] * inv), "f"(o[i * 4 + 2 * hr + 1] * inv)
                   : "memory");
    }
  }
}

// Cluster merge, after every block of the cluster has stashed its partial (sync_cluster): the
// cluster's block of rank z (split z: the cluster is the row tile's num_splits blocks along z)
// merges rows z + n (warp + 8 j), j = 0, 1, .. of the row tile, n the request's non-empty
// splits (the first n ranks), reading every non-empty block's stash through distributed shared
// memory, with the merge kernel's arithmetic (merge_add and the rest: the same bits).
// Four rows per warp at a time, eight lanes per row, each lane 16 float4 of columns
// 4 (g + 8 c): one warp per row, as in the merge kernel, ran ~1 us per row here, its per-row
// work (the max, the weights, the divide, the log) a chain of dependent steps at two warps per
// scheduler (cuda/NOTES.md v15). Partials are read two at a time (all of n = 2 in one round
// trip); lane g < n of a row holds the lse of partial g.
__device__ __forceinline__ void cluster_merge(const PartialArgs& args, const BlockWork& w,
                                              int32_t n) {
  constexpr int kLanes = 8;                  // lanes per row
  constexpr int kRowsAtOnce = 32 / kLanes;   // rows per warp at a time
  constexpr int kC = kLatentDim / 4 / kLanes;  // float4 per lane and partial
  constexpr int kWarps = kThreads / 32;
  const VerifyParams& p = args.p;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane % kLanes, q = lane / kLanes;
  const int32_t rank = blockIdx.z;
  if (rank >= n) return;  // an empty split's block owns no rows
  const int32_t H = p.num_heads;
  for (int j0 = 0;; j0 += kRowsAtOnce) {
    const int r = rank + n * (warp + kWarps * (j0 + q));
    const int32_t row = static_cast<int32_t>(w.row0) + r;  // < D H <= 1024 x 128
    const bool active = r < kRows && row < w.valid_rows;
    if (!__any_sync(0xffffffffu, active)) break;
    const float lse_mine =
        active && g < n ? ld_cluster_f32(cluster_addr(kv_buf(0) + kOffStashLse + r * 4,
                                                      static_cast<uint32_t>(g)))
                        : -INFINITY;
    float big_m = lse_mine;  // the max over the row's eight lanes
#pragma unroll
    for (int off = kLanes / 2; off >= 1; off >>= 1)
      big_m = fmaxf(big_m, __shfl_xor_sync(0xffffffffu, big_m, off));
    float4 o[kC];
#pragma unroll
    for (int c = 0; c < kC; ++c) o[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    float wsum = 0.f;
#pragma unroll 1
    for (int32_t s0 = 0; s0 < n; s0 += 2) {  // n is the block's: every lane runs the shuffles
      float lse_s[2];
#pragma unroll
      for (int u = 0; u < 2; ++u)
        lse_s[u] = __shfl_sync(0xffffffffu, lse_mine, q * kLanes + ((s0 + u) & (kLanes - 1)));
      float4 v[2][kC];
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (active && s0 + u < n) {
          const uint32_t rank_s = static_cast<uint32_t>(s0 + u);
#pragma unroll
          for (int c = 0; c < kC; ++c)
            v[u][c] = ld_cluster_f32x4(cluster_addr(stash_unit(r, g + kLanes * c), rank_s));
        }
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (active && s0 + u < n && big_m != -INFINITY && lse_s[u] != -INFINITY) {
          const float wt = merge_weight(lse_s[u], big_m);
#pragma unroll
          for (int c = 0; c < kC; ++c) merge_add(o[c], wt, v[u][c]);
          wsum += wt;
        }
    }
    if (active) {
      if (big_m != -INFINITY) merge_normalize(o, wsum);
      const int64_t token = w.e.q_begin + row / H;
      const int32_t head = row % H;
#pragma unroll
      for (int c = 0; c < kC; ++c) merge_store(p, token, head, 4 * (g + kLanes * c), o[c]);
      if (g == 0) merge_store_lse(p, token, head, big_m, wsum);
    }
  }
}

// Warpgroup 0: S, the online softmax, P, O's first kCols0 columns; then the row totals.
// Tiles below draft_tiles are draft tiles (tree mask); last_keys: valid keys of the last tile
// when it is a prefix tile (kKvTile otherwise: a draft tile's visibility covers its end).
__device__ __forceinline__ void math_warpgroup(const PartialArgs& args, int num_tiles,
                                               int last_keys, int draft_tiles) {
  const VerifyParams& p = args.p;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int wq = tid >> 5;               // warp: rows wq * 16 ..
  const int frag_col = (lane & 3) * 2;   // accumulator columns 8 i + frag_col, + 1
  const int r0 = wq * 16 + (lane >> 2);  // accumulator rows r0 and r0 + 8

  // ---- Prologue, while warpgroup 1's gather of tile 0 is in flight (tile 1's follows once Q
  // has landed) and it decodes the first tiles' draft visibility. Q: 64 rows x 72
  // units of 16 bytes, rows past the request zero-filled; warp wq copies its 16 rows, each row
  // as three warp-wide runs (units lane, lane + 32, lane + 64 < 72). The latent 64 units are
  // staged in buffer 2 (loaded into registers below, before tile 2 is gathered there); the rope
  // units go to their own block for the whole kernel.
  {
    const BlockWork w = block_work(args);
    MLAV_TRACE(kTraceWork);
    const int32_t H = p.num_heads;
    const __nv_bfloat16* qbase = static_cast<const __nv_bfloat16*>(p.q);
#pragma unroll 4
    for (int i = 0; i < 16; ++i) {
      const int r = wq * 16 + i;
      const int row = static_cast<int>(w.row0) + r;  // < D * H <= 1024 * 128
      const bool ok = row < w.valid_rows;
      const int t = ok ? row / H : 0, h = ok ? row - t * H : 0;
      const __nv_bfloat16* src_row =
          qbase + (w.e.q_begin + t) * p.q_token_stride + int64_t{h} * p.q_head_stride;
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const int unit = lane + 32 * k;
        if (unit >= 72) continue;
        const int64_t col =
            unit < 64 ? p.q_latent_offset + unit * 8 : p.q_rope_offset + (unit - 64) * 8;
        const uint32_t blk = unit < 64 ? kv_buf(2) + (unit >> 3) * kBlockBytes
                                       : smem_base() + kOffQRope;
        cp_async16(blk + r * 128 + (((unit & 7) ^ (r & 7)) * 16), ok ? src_row + col : qbase,
                   ok ? 16 : 0);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
    MLAV_TRACE(kTraceQStaged);
    // Q staged, for all of warpgroup 0: an mbarrier of its 128 threads. (A 128-thread named
    // barrier here made compute-sanitizer racecheck lose track of every later barrier, v14; a
    // 256-thread one made warpgroup 0 wait for warpgroup 1's draft decode, v15.)
    mbar_arrive(bar_q_staged());
    mbar_wait(bar_q_staged(), 0);
  }

  // Q's latent columns as wgmma A fragments: k16 step 4 c + ks is columns 64 c + 16 ks ..,
  // ldmatrix.x4 of rows wq * 16 + (lane & 15), 16-byte unit 2 ks + (lane >> 4).
  uint32_t qf[32][4];
  {
    const int r = wq * 16 + (lane & 15);
    const uint32_t staged = kv_buf(2) + r * 128;
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const int unit = 2 * ks + (lane >> 4);
        ldmatrix_x4(staged + c * kBlockBytes + ((unit ^ (r & 7)) * 16), qf[4 * c + ks][0],
                    qf[4 * c + ks][1], qf[4 * c + ks][2], qf[4 * c + ks][3]);
      }
  }
  mbar_arrive(bar_q_loaded());  // buffer 2 may now receive tile 2
  MLAV_TRACE(kTraceLoop);

  float m_run[2] = {-INFINITY, -INFINITY};  // rows r0, r0 + 8, in log2 units
  float l_run[2] = {0.f, 0.f};
  float prev_scale[2] = {1.f, 1.f};  // the row factors of the tile whose P awaits this PV
  float o[kCols0 / 2];
#pragma unroll
  for (int i = 0; i < kCols0 / 2; ++i) o[i] = 0.f;
  float s[32];
#pragma unroll 1
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int b = tile % kBufs;
    const uint32_t buf = kv_buf(b);
    mbar_wait(bar_full(b), (tile / kBufs) & 1);
    if (tile == 0) MLAV_TRACE(kTraceTile0);
    fence_proxy_async();  // the generic-proxy copies, before wgmma reads them

    // S = Q K^T: 64 rows x 64 keys over 576 columns, latent from registers, rope from smem;
    // issued right behind the previous tile's PV.
    const Desc desc_k = sw128_desc(buf, 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_m64n64k16_rs(s, qf[4 * c + ks], desc_at(desc_k, c * kBlockBytes + ks * 32),
                           (c | ks) != 0);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_m64n64k16_ss(s, desc_at(sw128_desc(smem_base() + kOffQRope, 16, 1024), ks * 32),
                         desc_at(desc_k, 8 * kBlockBytes + ks * 32), 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);
    // Warpgroup 1 may now queue its PV of the previous tile. Every tile arrives, tile 0 too, so
    // the phases of each buffer's barrier stay one per use of the buffer (a skipped arrival
    // would let this warpgroup, up to two tiles ahead, complete a phase twice before the wait).
    mbar_arrive(bar_s_done(b));
    // This warpgroup's PV of the previous tile, queued behind S as well: both PV halves run on
    // the tensor cores under the softmax below.
    if (tile > 0) {
      rescale_rows(o, prev_scale[0], prev_scale[1]);
      issue_pv<kCols0, 0>(o, (tile - 1) % kBufs);
    }

    // Online softmax of the tile (split_plan.h numerics 2, scores in log2 units as in v4).
    // Keys past the prefix range (last tile only) and, in draft tiles, keys the tree hides or
    // past the draft get -inf: probability exactly 0. Scores stay raw here; the log2-unit scale
    // c = sm_scale log2(e) > 0 (checked on the host) is applied inside the exponent's FFMA.
    // Rounding is monotonic, so fl(max s * c) is the max of fl(s c): the row max is the one the
    // scaled scores would give.
    if (tile + 1 == num_tiles && last_keys < kKvTile) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int f = 0; f < 4; ++f)
          if (i * 8 + frag_col + (f & 1) >= last_keys) s[i * 4 + f] = -INFINITY;
    }
    if (tile < draft_tiles) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const uint64_t vis = vis_words(b)[r0 + 8 * hr] >> frag_col;
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int f = 0; f < 2; ++f)
            if (!((vis >> (i * 8 + f)) & 1ull)) s[i * 4 + 2 * hr + f] = -INFINITY;
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int f = 0; f < 4; ++f) tile_max[f >> 1] = fmaxf(tile_max[f >> 1], s[i * 4 + f]);
    const float scale_log2 = p.sm_scale * 1.4426950408889634f;
    float m_new[2], part_sum[2] = {0.f, 0.f}, scale[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 1));
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 2));
      m_new[hr] = fmaxf(m_run[hr], tile_max[hr] * scale_log2);
      // m_new == -inf: nothing visible yet, keep the (zero) state. Otherwise 2^(-inf - x) = 0
      // discards an empty previous state; -inf - -inf never occurs.
      scale[hr] = m_new[hr] == -INFINITY ? 1.f : softmax_exp2(m_run[hr] - m_new[hr]);
    }
    // P as bf16 into the tile's rope block (S has retired: nothing reads that block any more),
    // two 8-key column blocks per stmatrix.x4: lane l gives the address of row (l & 7) of
    // matrix l >> 3 = (rows + 8 (m & 1), key block 2 j + (m >> 1)); each register holds the
    // thread's accumulator pair of one matrix, the layout stmatrix stores.
    // Masked keys (-inf) get probability exactly 0: exp2(-inf - m) = 0 for finite m, and a row
    // with nothing visible yet subtracts 0 instead of m = -inf. l sums the unrounded fp32
    // values; the tensor cores get them rounded to bf16 (round to nearest even).
    const float m_use[2] = {m_new[0] == -INFINITY ? 0.f : m_new[0],
                            m_new[1] == -INFINITY ? 0.f : m_new[1]};
    const uint32_t p_s = buf + 8 * kBlockBytes;
    const int st_row = wq * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t pk[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = 2 * j + (m >> 1), hr = m & 1;
        const float p0 = softmax_exp2(fmaf(s[i * 4 + 2 * hr], scale_log2, -m_use[hr]));
        const float p1 = softmax_exp2(fmaf(s[i * 4 + 2 * hr + 1], scale_log2, -m_use[hr]));
        part_sum[hr] += p0 + p1;
        const __nv_bfloat162 v = __floats2bfloat162_rn(p0, p1);
        pk[m] = *reinterpret_cast<const uint32_t*>(&v);
      }
      const int blk = 2 * j + (lane >> 4);
      stmatrix_x4(p_s + st_row * 128 + ((blk ^ (st_row & 7)) * 16), pk);
    }
    // l stays a per-thread partial sum over this thread's 16 keys of each row (the four threads
    // of a row share the scale, so their sums add up once, at the end).
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      l_run[hr] = l_run[hr] * scale[hr] + part_sum[hr];
      m_run[hr] = m_new[hr];
    }
    if ((lane & 3) == 0) {
      row_scale(b)[r0] = scale[0];
      row_scale(b)[r0 + 8] = scale[1];
    }
    fence_proxy_async();  // P is read by wgmma next
    mbar_arrive(bar_p_full(b));
    prev_scale[0] = scale[0];
    prev_scale[1] = scale[1];
    // The previous tile's PV has retired (unconditional wait: with none in flight it returns at
    // once, and ptxas serializes wgmma when it cannot match a conditional wait to the issue):
    // its buffer may be refilled once warpgroup 1 is done with it too.
    wgmma_wait<0>();
    fence_regs(o);
    if (tile > 0 && tile + 2 < num_tiles) mbar_arrive(bar_empty((tile - 1) % kBufs));
  }
  rescale_rows(o, prev_scale[0], prev_scale[1]);
  issue_pv<kCols0, 0>(o, (num_tiles - 1) % kBufs);
  wgmma_wait<0>();
  fence_regs(o);
  MLAV_TRACE(kTraceLoopEnd);

  // Row totals of the partial (split_plan.h numerics 3): 1 / l for both warpgroups.
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 1);
    l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 2);
  }
  if (args.cluster_merge) {
    float lse[2];
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      lse[hr] = row_lse(l_run[hr], m_run[hr], row_inv_l()[r0 + 8 * hr]);
    sync_all_warpgroups();  // both warpgroups' last PV retired: the KV buffers are free
    if ((lane & 3) == 0) {
      float* stash_lse = reinterpret_cast<float*>(smem_wgmma + kOffKv + kOffStashLse);
      stash_lse[r0] = lse[0];
      stash_lse[r0 + 8] = lse[1];
    }
    stash_partial(o, 0);
    return;
  }
  if ((lane & 3) == 0) {
    const BlockWork w = block_work(args);
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      store_row_totals(args, w.split, w.e, w.row0, w.valid_rows, r0 + 8 * hr, l_run[hr],
                       m_run[hr], row_inv_l());
  }
  sync_all_warpgroups();
  store_partial(args, o, 0);
  MLAV_TRACE(kTraceStored);
}

// Warpgroup 1: the gather, O's other kCols1 columns.
__device__ __forceinline__ void pv_warpgroup(const PartialArgs& args, int num_tiles,
                                             int draft_tiles, int draft_keys, int prefix_keys) {
  const VerifyParams& p = args.p;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int r0 = ((tid >> 5) & 3) * 16 + (lane >> 2);

  // Gather: loader thread lt (0..127) owns 16-byte unit ld_u of every 64-column block of keys
  // ld_key + 16 kk, kk = 0..3 (8 threads read one 128-byte run of a row: coalesced). Slot ids
  // are loaded one tile ahead, so the dependent index load is in flight while a tile streams.
  // Draft tiles (the first draft_tiles) read k_extend rows or the kv_indices entries after the
  // prefix; prefix tiles read the split's kv_indices entries.
  const int lt = tid - 128;
  const int ld_u = lt & 7;
  const int ld_key = lt >> 3;  // 0..15
  const bool draft_from_extend = p.draft_source == DraftKvSource::ExtendRows;
  // This thread's first kv_indices entry of the prefix part, and of the draft part: there, with
  // draft rows from k_extend, the number of this thread's first k_extend row instead (one
  // register pair for both keeps warpgroup 1, which holds 192 accumulators, from spilling).
  const int64_t* prefix_indices;
  int64_t draft_first;
  {
    const BlockWork w = block_work(args);
    const int64_t* req = p.kv_indices + w.e.kv_begin + ld_key;
    prefix_indices = req + w.keys.prefix_begin;
    draft_first = draft_from_extend
                      ? w.e.q_begin + w.keys.draft_begin + ld_key
                      : reinterpret_cast<int64_t>(req + w.e.prefix_len + w.keys.draft_begin);
  }
  // Key kk of this thread in tile `tile`, counted from the start of its part, and whether the
  // part holds it.
  auto part_key = [&](int tile, int kk, bool& ok) -> int {
    const bool draft = tile < draft_tiles;
    const int key = (draft ? tile : tile - draft_tiles) * kKvTile + 16 * kk;
    ok = tile < num_tiles && key + ld_key < (draft ? draft_keys : prefix_keys);
    return key;
  };
  auto load_slot = [&](int tile, int kk) -> int64_t {
    bool ok;
    const int key = part_key(tile, kk, ok);
    if (!ok) return 0;
    if (tile < draft_tiles)
      return draft_from_extend ? draft_first + key
                               : reinterpret_cast<const int64_t*>(draft_first)[key];
    return prefix_indices[key];
  };
  // The slots of tiles 0 and 1, loaded together (the loads of tile 1's would otherwise wait for
  // tile 0's copies to be issued, one more memory latency before the pipeline is full).
  int64_t next_slot[4], slot1[4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    next_slot[kk] = load_slot(0, kk);
    slot1[kk] = load_slot(1, kk);
  }
  // The mask row of this thread's draft visibility (row lt / 2, keys half * 32 .. of each of the
  // first kBufs draft tiles, decoded below): its offset loaded beside the slot ids, its bytes
  // prefetched into L1 before the tiles' copies are queued, so the decode's reads do not wait
  // behind them (chain4 -1.3%, tree16 -0.5%, cuda/NOTES.md v15).
  const int vis_r = lt >> 1, vis_half = lt & 1;
  MaskRow mrow{};
  bool vis_row_ok = false;
  int64_t vis_key0 = 0, vis_key_end = 0;
  if (draft_tiles > 0) {
    const BlockWork w = block_work(args);
    const int64_t row = w.row0 + vis_r;
    vis_row_ok = row < w.valid_rows;
    vis_key0 = w.keys.draft_begin + vis_half * 32;
    vis_key_end = w.keys.draft_end;
    if (vis_row_ok) {
      mrow = mask_row(p, w.req, w.e, static_cast<int32_t>(row / p.num_heads));
#pragma unroll
      for (int tile = 0; tile < kBufs; ++tile)
        if (tile < draft_tiles) mrow.prefetch<32>(vis_key0 + tile * kKvTile);
    }
  }
  // Issues the whole of tile `tile` into buffer tile % 3; past the last key the rows are
  // zero-filled (src-size 0), so stale keys never meet a probability.
  // own_arrival false: the caller arrives on the tile's "landed" barrier itself (the prologue,
  // after it decodes the visibility words that the arrival publishes: after the issue for tile
  // 0, before it for tile 1, whose gather waits for Q).
  auto issue_tile = [&](int tile, bool load_next, bool own_arrival) {
    const int b = tile % kBufs;
    const uint32_t dst0 = kv_buf(b) + ld_key * 128 + ((ld_u ^ (ld_key & 7)) * 16);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      bool ok;
      part_key(tile, kk, ok);
      const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
      const __nv_bfloat16* lat = pool;
      const __nv_bfloat16* rope = pool;
      if (ok && tile < draft_tiles && draft_from_extend) {
        // Draft rows from k_extend (latent-first): next_slot holds the row.
        lat = static_cast<const __nv_bfloat16*>(p.k_extend) + next_slot[kk] * p.k_extend_stride +
              ld_u * 8;
        rope = lat + kLatentDim;
      } else if (ok) {
        lat = pool + p.kv_layout.latent_index(next_slot[kk]) + ld_u * 8;
        rope = pool + p.kv_layout.rope_index(next_slot[kk]) + ld_u * 8;
      }
      const int bytes = ok ? 16 : 0;
      const uint32_t dst = dst0 + kk * 16 * 128;  // (ld_key + 16 kk) & 7 == ld_key & 7
#pragma unroll
      for (int c = 0; c < 8; ++c) cp_async16(dst + c * kBlockBytes, lat + c * 64, bytes);
      cp_async16(dst + 8 * kBlockBytes, rope, bytes);
    }
    if (own_arrival)
      mbar_arrive_on_copies(bar_full(b));
    else
      cp_async_arrive_noinc(bar_full(b));
    if (load_next) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) next_slot[kk] = load_slot(tile + 1, kk);
    }
  };
  // Draft visibility of draft tile `tile` >= kBufs (more than 192 draft keys in this block; the
  // first tiles are decoded in the prologue), one 64-bit word per row into vis_words(tile % 3),
  // two threads per row, 32 keys each, while O is live (4 reads in flight); written before
  // this thread's "landed" arrival for the tile, which publishes it.
  auto decode_vis = [&](int tile) {
    const BlockWork w = block_work(args);
    const int r = lt >> 1, part = lt & 1;
    const int64_t row = w.row0 + r;
    uint64_t bits = 0;
    if (row < w.valid_rows)
      bits = mask_row(p, w.req, w.e, static_cast<int32_t>(row / p.num_heads))
                 .bits<32, 4>(w.keys.draft_begin + tile * kKvTile + part * 32, w.keys.draft_end)
             << (part * 32);
    bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
    if (part == 0) vis_words(tile % kBufs)[r] = bits;
  };
  auto load_tile = [&](int tile) {
    if (tile >= kBufs && tile < draft_tiles) decode_vis(tile);  // the first kBufs: prologue
    issue_tile(tile, true, true);
  };

  issue_tile(0, false, false);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) next_slot[kk] = slot1[kk];
  // Tiles 0 and 1 that are prefix tiles need no visibility: this thread's arrivals now.
#pragma unroll
  for (int t = 0; t < 2; ++t)
    if (t < num_tiles && t >= draft_tiles) mbar_arrive(bar_full(t));
  // Draft visibility of the first kBufs tiles (usually the whole draft: D <= 192), while tile
  // 0's copies fly and warpgroup 0 loads Q: two threads per row, 32 keys each, the mask reads
  // independent (a key past the draft is not read). Published by this thread's arrival on the
  // tile's "landed" barrier, right after its words for tiles 0 and 1 (so S of tile 0 need not
  // wait for tile 1's decode), when it is issued for tile 2. Done by warpgroup 0 before it
  // loads Q, it delayed the blocks that hold draft tiles by ~3.5 us on ddtree128 (cuda/NOTES.md
  // v14); one key at a time in the loop below, tree32 26 us (v13).
  if (draft_tiles > 0) {
#pragma unroll 1
    for (int tile = 0; tile < kBufs && tile < draft_tiles; ++tile) {
      uint64_t bits = 0;
      if (vis_row_ok)
        bits = mrow.bits<32, 32>(vis_key0 + tile * kKvTile, vis_key_end) << (vis_half * 32);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
      if (vis_half == 0) vis_words(tile)[vis_r] = bits;
      if (tile < 2) mbar_arrive(bar_full(tile));
    }
  }
  // Tile 1's gather only once Q has landed, so Q and tile 0 do not share the first wave's fill
  // with it (cuda/NOTES.md v45-v46, six rounds on the nine: 79 of 108 timings faster, median
  // -0.7%; chain4 under the uniform plan, whose tiles come from HBM, +0.3 to +1.4% in all six).
  // This thread's own arrival on tile 1's "landed" barrier above may precede the issue: that
  // barrier also waits for every loader thread's copies-done arrival, which the issue adds.
  mbar_wait(bar_q_staged(), 0);
  if (num_tiles > 1) issue_tile(1, true, false);
  mbar_wait(bar_q_loaded(), 0);  // warpgroup 0 has Q in registers: buffer 2 is free
  if (num_tiles > 2) load_tile(2);

  // 64 rows x 2 kCols1 columns, oa then ob: o[4 i + f], column block i (n8)
  float oa[kCols1 / 2], ob[kCols1 / 2];
#pragma unroll
  for (int i = 0; i < kCols1 / 2; ++i) oa[i] = ob[i] = 0.f;
#pragma unroll 1
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int b = tile % kBufs;
    mbar_wait(bar_p_full(b), (tile / kBufs) & 1);
    wgmma_wait<0>();  // this warpgroup's PV of the previous tile
    fence_regs(oa);
    fence_regs(ob);
    // Refill the previous tile's buffer with tile + 2 once warpgroup 0's PV of it has retired
    // too (it arrives before its softmax of this tile, so this rarely waits). The copies are
    // issued while the tensor cores run S of the next tile, two tiles ahead of their use.
    if (tile >= 1 && tile + 2 < num_tiles) {
      const int prev = (tile - 1) % kBufs;
      mbar_arrive(bar_empty(prev));
      mbar_wait(bar_empty(prev), ((tile - 1) / kBufs) & 1);
      load_tile(tile + 2);
    }
    // Queue this PV behind S of the next tile, so it runs on the tensor cores while warpgroup 0
    // does that tile's softmax (issued earlier, it would delay S instead).
    if (tile + 1 < num_tiles) mbar_wait(bar_s_done((tile + 1) % kBufs), ((tile + 1) / kBufs) & 1);
    const float scale0 = row_scale(b)[r0], scale1 = row_scale(b)[r0 + 8];
    rescale_rows(oa, scale0, scale1);
    rescale_rows(ob, scale0, scale1);
    issue_pv<kCols1, kCols0>(oa, b);
    issue_pv<kCols1, kCols0 + kCols1>(ob, b);
  }
  wgmma_wait<0>();
  fence_regs(oa);
  fence_regs(ob);
  MLAV_TRACE_WG1(kTracePvDone);

  // ---- the normalized partial (split_plan.h numerics 3): O / l ----
  sync_all_warpgroups();  // 1 / l written
  if (args.cluster_merge) {
    stash_partial(oa, kCols0);
    stash_partial(ob, kCols0 + kCols1);
    return;
  }
  store_partial(args, oa, kCols0);
  store_partial(args, ob, kCols0 + kCols1);
}

}  // namespace

__global__ void __launch_bounds__(kThreads, 1) verify_partial_wgmma(const PartialArgs args) {
#ifdef MLAV_WGMMA_TRACE
  const unsigned long long trace_t0 = trace_now();
  unsigned trace_launch = 0;
  if (threadIdx.x == 0)
    trace_launch = atomicAdd(&g_trace_tickets, 1u) / (gridDim.x * gridDim.y * gridDim.z);
#endif
  // The merge kernel (a programmatic dependent launch) may be scheduled once every block has
  // started; its blocks wait for this grid's completion before reading anything it writes.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const BlockWork w = block_work(args, /*first=*/true);
  // A cluster shares its row tile, so it leaves here whole.
  if (w.row0 >= w.valid_rows) return;
  if (w.keys.empty()) {
    // The merge skips empty splits by the same range function; in a cluster, an empty split's
    // block merges no rows but must join both of its barriers.
    if (args.cluster_merge) {
      sync_cluster();
      sync_cluster();
    }
    return;
  }
  // Broadcast from lane 0: the counts come from metadata loads, and wgmma issued under a
  // condition the compiler cannot prove warp-uniform is serialized (ptxas C7520).
  const int num_tiles = __shfl_sync(0xffffffffu, w.num_tiles, 0);
  const int draft_tiles = __shfl_sync(0xffffffffu, w.draft_tiles, 0);

  // The swizzle pattern repeats every 1024 bytes, so every block must start on a 1024-byte
  // boundary. Without static shared memory the dynamic window starts at the block's shared
  // base, which is 1024-aligned; there is no room left to align by hand (kUsed is within 384
  // bytes of Hopper's 232,448), so a misaligned base stops the kernel loudly instead.
  if ((smem_base() & 1023u) != 0) __trap();
  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int b = 0; b < kBufs; ++b) {
      mbar_init(bar_full(b), 2 * 128);  // 128 loader threads x (own + copies-done arrival)
      mbar_init(bar_p_full(b), 128);    // warpgroup 0's threads, once P of a tile is written
      mbar_init(bar_empty(b), 256);     // both warpgroups, once their PV of the tile is done
      mbar_init(bar_s_done(b), 128);    // warpgroup 0's threads, once S of the tile retired
    }
    mbar_init(bar_q_staged(), 128);  // warpgroup 0's threads, each once its Q copies are done
    mbar_init(bar_q_loaded(), 128);  // warpgroup 0's threads, each once Q is in its registers
  }

  __syncthreads();  // the barriers initialized, before any arrival

  // Warpgroup 0 computes S and the softmax; broadcast from lane 0 so the compiler can see the
  // branch is warp-uniform (C7520, as above).
  if (__shfl_sync(0xffffffffu, tid >> 7, 0) == 0) {
    const int64_t prefix_tail = w.keys.prefix_keys() % kKvTile;
    math_warpgroup(args, num_tiles,
                   num_tiles > draft_tiles && prefix_tail != 0 ? static_cast<int>(prefix_tail)
                                                               : kKvTile,
                   draft_tiles);
  } else {
    // Key counts fit int: a split holds at most P + D keys, and validate_params bounds P by the
    // int32 kv_indptr.
    pv_warpgroup(args, num_tiles, draft_tiles, static_cast<int>(w.keys.draft_keys()),
                 static_cast<int>(w.keys.prefix_keys()));
  }
  if (args.cluster_merge) {
    // The block's metadata loads overlap the barrier (w is not kept live across the loops).
    const BlockWork wm = block_work(args);
    const int32_t n = folded_nonempty_splits(wm.e.prefix_len, wm.e.draft_nodes, args.p.num_splits);
    sync_cluster();  // every block's partial stashed
    MLAV_TRACE(kTraceSync);
    cluster_merge(args, wm, n);
    MLAV_TRACE(kTraceMerged);
    sync_cluster();  // no block leaves while another may still read its stash
  }
#ifdef MLAV_WGMMA_TRACE
  __syncthreads();
  const unsigned b = trace_block();
  if (tid == 0 && trace_launch == kTraceLaunch && b < kTraceBlocks) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_trace[b][kTraceStart] = trace_t0;
    g_trace[b][kTraceSm] = sm;
    g_trace[b][kTraceEnd] = trace_now();  // seals the record
    if (b == 0) {
      g_trace_grid[0] = gridDim.x;
      g_trace_grid[1] = gridDim.y;
      g_trace_grid[2] = gridDim.z;
    }
  }
#endif
}

#ifdef MLAV_WGMMA_TRACE
// Prints the traced launch of the previous workload (if it got that far) and rearms the trace.
static void dump_trace() {
  static unsigned long long tr[kTraceBlocks][kTraceFields];
  CUDA_CHECK(cudaDeviceSynchronize());
  unsigned grid[3] = {0, 0, 0};
  CUDA_CHECK(cudaMemcpyFromSymbol(grid, g_trace_grid, sizeof grid));
  CUDA_CHECK(cudaMemcpyFromSymbol(tr, g_trace, sizeof tr));
  const unsigned nb = std::min(grid[0] * grid[1] * grid[2], kTraceBlocks);
  unsigned long long t0 = ~0ull, t1 = 0;
  for (unsigned i = 0; i < nb; ++i)
    if (tr[i][kTraceEnd] != 0) {
      t0 = std::min(t0, tr[i][kTraceStart]);
      t1 = std::max(t1, tr[i][kTraceEnd]);
    }
  if (t1 != 0) {
    std::printf("TRACE grid %u %u %u span %.2f us\n", grid[0], grid[1], grid[2], (t1 - t0) * 1e-3);
    auto us = [&](unsigned long long t) { return t >= t0 ? (t - t0) * 1e-3 : -1.0; };
    for (unsigned i = 0; i < nb; ++i)
      if (tr[i][kTraceEnd] != 0)
        std::printf(
            "TB %4u z %2u sm %3llu start %7.2f work %7.2f qstaged %7.2f pro %7.2f tile0 %7.2f "
            "loop %7.2f pvdone %7.2f stored %7.2f sync %7.2f merged %7.2f end %7.2f\n",
            i, i / (grid[0] * grid[1]), tr[i][kTraceSm], us(tr[i][kTraceStart]),
            us(tr[i][kTraceWork]), us(tr[i][kTraceQStaged]), us(tr[i][kTraceLoop]),
            us(tr[i][kTraceTile0]), us(tr[i][kTraceLoopEnd]), us(tr[i][kTracePvDone]),
            us(tr[i][kTraceStored]), us(tr[i][kTraceSync]), us(tr[i][kTraceMerged]),
            us(tr[i][kTraceEnd]));
  }
  static const unsigned long long zero[kTraceBlocks][kTraceFields] = {};
  const unsigned z = 0, zg[3] = {0, 0, 0};
  CUDA_CHECK(cudaMemcpyToSymbol(g_trace, zero, sizeof zero));
  CUDA_CHECK(cudaMemcpyToSymbol(g_trace_tickets, &z, sizeof z));
  CUDA_CHECK(cudaMemcpyToSymbol(g_trace_grid, zg, sizeof zg));
}
#endif

void prepare_partial_wgmma() {
#ifdef MLAV_WGMMA_TRACE
  dump_trace();
  // The last workload's launch too: at exit, before the runtime's own handlers (registered
  // earlier, so run later) tear the context down.
  // A failure there (CUDA_CHECK throws) is printed: an exception out of an atexit handler would
  // terminate the process.
  static const bool at_exit = std::atexit([] {
    try {
      dump_trace();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trace at exit: %s\n", e.what());
    }
  }) == 0;
  (void)at_exit;
#endif
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  kWgmmaSmemBytes));
}

void launch_partial_wgmma(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  // The folded plan has no draft slice of the grid.
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size),
            static_cast<unsigned>(args.folded ? p.num_splits : p.num_splits + 1));
  if (!args.cluster_merge) {  // the balanced plan never merges in clusters (initialize)
    CUDA_CHECK(launch_partial_kernel(verify_partial_wgmma, args, grid, kWgmmaSmemBytes, stream));
    return;
  }
  // One cluster per row tile: its num_splits blocks along z (cluster rank = split).
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kWgmmaSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(p.num_splits);
  config.attrs = attr;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, verify_partial_wgmma, args));
}

int blocks_per_sm_wgmma() {
  prepare_partial_wgmma();
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, verify_partial_wgmma, kThreads,
                                                           kWgmmaSmemBytes));
  return n;
}

int max_active_clusters_wgmma(int cluster_size) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1, 1, static_cast<unsigned>(cluster_size));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kWgmmaSmemBytes;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(cluster_size);
  config.attrs = attr;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, verify_partial_wgmma, &config));
  return clusters;
}

}  // namespace mlaverify::cuda::detail

// The warp-specialized sm_120 partial kernel (MLAV_CUDA_KERNEL=mma2's default ring where its
// sm_120a / sm_90a image runs, since v42; MLAV_MMA2_RING=ws names it; cuda/NOTES.md v30-v42).
// Same block work, same plan, same bits as verify_partial (verify_kernel.cuh); a different
// division of the block's threads.
//
// Why: on the H200 the 8-warp kernel runs S (shared-memory bound: Q and K operand reads), then
// the softmax (no tensor work), then PV (tensor bound), one after the other behind block-wide
// barriers, so the shared-memory pipe idles in PV and the tensor pipe in S and the softmax
// (NOTES v24-v29: ~10.2K cycles per 64-key tile against ~3.6K of tensor work). Here the phases
// of consecutive tiles run at once on different warps:
//   warpgroup 0 (4 "S warps", 128 threads): S = Q K^T for tile j + 1, its softmax, P to smem;
//   warpgroups 1-2 (8 "PV warps", 256 threads): O += P V for tile j, O's 64 x 512 fp32.
// The S warps hold no O and the PV warps no Q, so setmaxnreg moves registers from the first to
// the others (needs sm_90a / sm_120a). Each group streams its own chunks (K and k_pe for the S
// warps, V for the PV warps) through its own cp.async ring of 32-column chunks of 64 keys (4 KB;
// the V ring's 8 KB hold two), synchronised within the group by a named barrier per chunk. The
// groups meet twice per tile, on mbarriers (MLAV_WS_MBAR): "P full" (S warps arrive when P and
// the row factors of tile j are in smem; PV warps wait) and "P empty" (PV warps arrive once P's
// fragments and the next tile's KV rows are in registers; the S warps wait before re-filling P's
// bytes, or before writing the next P where P has its own); and once at the end ("1 / l ready").
//
// Shared memory (101,376 bytes, the sm_120 budget): Q's latent columns 64 x 512 bf16 (Q's k_pe
// fragments come from global memory into the S warps' registers each tile), the S ring of 6
// chunks of 4 KB with P (64 x 64 bf16) over its buffers 4-5 (Layout::kPInRing), the V ring of
// 2 x 4 KB, row max / sum exchange, row factors and draft bits. This is v30's form (each group
// runs its own loader), the fastest under the card's emulated tensor rate (cuda/NOTES.md v37);
// v31-v36's default added a hand-over table of the next tile's 64 latent-row pointers (the S
// warps' loader writes it, the PV warps' loader and the S warps' latent copies read it) and
// 32-key V chunks: -DMLAV_WS_VKEYS=32 -DMLAV_WS_SLAT=1 -DMLAV_WS_HANDOFF=1. Other splits
// (MLAV_WS_SSTAGES, MLAV_WS_STAGES) give P its own 8 KB; MLAV_WS_QL1=2 gives v31's other form.
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"
#include "cuda/ws_ring.h"

#ifdef MLAV_WS_TRACE
#include <cstdio>
#include <cstdlib>
#endif

namespace mlaverify::cuda::detail {
namespace ws {

constexpr int kSThreads = 128;   // warpgroup 0
constexpr int kPvThreads = 256;  // warpgroups 1 and 2
constexpr int kThreadsWs = kSThreads + kPvThreads;
constexpr int kCols = 32;                              // columns per chunk
constexpr int kChunkBytes = kKvTile * kCols * 2;       // 4 KB
constexpr int kRowBytes = kCols * 2;                   // 64 bytes: 4 units of 16 bytes
constexpr int kLatParts = kLatentDim / kCols;          // 16 latent chunks (K, then V)
constexpr int kSParts = kLatParts + kRopeDim / kCols;  // 18: + 2 k_pe chunks
constexpr int kVParts = kLatParts;                     // 16 column chunks of V per tile
// MLAV_WS_VKEYS=32: the V ring's chunks are 32 keys x 32 columns (2 KB; a column chunk's two key
// halves in consecutive steps), so the same bytes keep more of them in flight (cuda/NOTES.md v31).
// The default is v30's 64 keys: under the card's emulated tensor rate the 32-key chunks cost v30's
// form 21-27% on the compute-bound workloads, and chain4, which they helped, goes to ring 4
// (NOTES v37).
#ifndef MLAV_WS_VKEYS
#define MLAV_WS_VKEYS 64
#endif
constexpr int kVKeys = MLAV_WS_VKEYS;
static_assert(kVKeys == 64 || kVKeys == 32, "a tile's keys or half of them");
constexpr int kVHalves = kKvTile / kVKeys;        // 1 or 2
constexpr int kVSteps = kVParts * kVHalves;       // V chunk steps per tile
constexpr int kVChunkBytes = kVKeys * kCols * 2;  // 4 or 2 KB
// MLAV_WS_QL1=n: Q's last n latent chunks are not kept in shared memory: the S warps read their
// A fragments from global memory (L1 after the first tile), as Q's k_pe fragments always were,
// and the 4 KB each frees go to the V ring (cuda/NOTES.md v31).
#ifndef MLAV_WS_QL1
#define MLAV_WS_QL1 0
#endif
constexpr int kQL1 = MLAV_WS_QL1;
// MLAV_WS_SLAT=1: the S warps' loader reads each key's latent row from the hand-over table at
// every copy instead of holding it in registers across the tile (cuda/NOTES.md v31).
#ifndef MLAV_WS_SLAT
#define MLAV_WS_SLAT 0
#endif
constexpr bool kSLat = MLAV_WS_SLAT != 0;
// MLAV_WS_ROW_EARLY=1 (with MLAV_WS_SLAT): an S step reads the key's latent row from the table
// before its chunk wait and group barrier, not after them, so that the read's latency (~150 of a
// step's ~1K sampled stalls behind it in the form before, profiled in cuda/NOTES.md v33) hides
// under the wait; the step that enters a tile still reads after entering it. 0: v31's form; 2:
// the step before reads it, after its own issue (the pointer held across a step).
#ifndef MLAV_WS_ROW_EARLY
#define MLAV_WS_ROW_EARLY 1
#endif
static_assert(MLAV_WS_ROW_EARLY >= 0 && MLAV_WS_ROW_EARLY <= 2, "0, 1 or 2");
constexpr bool kRowEarly = kSLat && MLAV_WS_ROW_EARLY != 0;
// MLAV_WS_HANDOFF=0: the PV warps run their own loader (v30's form; no 512-byte row table). The
// default since v37: the hand-over made the PV warps wait on the S warps' table, +5-9% on the
// compute-bound workloads at the card's emulated rate. v31-v36's form is
// -DMLAV_WS_VKEYS=32 -DMLAV_WS_SLAT=1 -DMLAV_WS_HANDOFF=1 (free of spills on sm_120a; so is
// today's default since v41, on sm_90a too).
#ifndef MLAV_WS_HANDOFF
#define MLAV_WS_HANDOFF 0
#endif
static_assert(MLAV_WS_HANDOFF != 0 || MLAV_WS_SLAT == 0,
              "MLAV_WS_SLAT reads the hand-over's table");
// MLAV_WS_PV_ROW0=1 (with the row hand-over): a PV thread whose key lies past the split copies
// the tile's first key's row instead of zero-filling (its P is exactly 0 and the row finite
// wherever the result is: 0 x v adds nothing), and copies nothing for a tile past the last.
// The step's copy is then one predicated cp.async from a register pair held across the tile,
// not a select of address and size per step (v32's profile: ~23 instructions per PV step, and
// the V fragments' ldmatrix waiting on the copy's address registers; cuda/NOTES.md v33).
#ifndef MLAV_WS_PV_ROW0
#define MLAV_WS_PV_ROW0 0
#endif
static_assert(MLAV_WS_PV_ROW0 == 0 || MLAV_WS_PV_ROW0 == 1, "0 or 1");
static_assert(MLAV_WS_PV_ROW0 == 0 || MLAV_WS_HANDOFF != 0, "the tile's first row is the table's");
constexpr bool kPvRow0 = MLAV_WS_PV_ROW0 != 0;
#if MLAV_WS_SLAT && (defined(MLAV_WS_STAGES) || defined(MLAV_WS_SSTAGES))
#error "MLAV_WS_SLAT needs the hand-over, which needs P over an S ring of 6: add -DMLAV_WS_SLAT=0"
#endif
constexpr int kQSmemParts = kLatParts - kQL1;  // Q's chunks in shared memory
constexpr int kQUnits = kQSmemParts * 4;       // 16-byte units per Q row there
constexpr int kQRowBytes = kQUnits * 16;       // 1024 - 64 n
static_assert(kQL1 >= 0 && kQL1 % 2 == 0 && kQSmemParts >= 8, "whole 128-byte swizzle groups");
// The S chunk step that loads Q's k_pe fragments for the tile's two k_pe chunks.
#ifndef MLAV_WS_QR_AT
#define MLAV_WS_QR_AT 13
#endif
constexpr int kQrAt = MLAV_WS_QR_AT;
#ifndef MLAV_WS_HOIST
#define MLAV_WS_HOIST 1
#endif
// MLAV_WS_EXP=1 / 2 (compile-only experiments, never run): the PV or the S warps return at once,
// so ptxas's spill report speaks of the other group alone (NOTES v30's register findings).
#ifndef MLAV_WS_EXP
#define MLAV_WS_EXP 0
#endif
#ifndef MLAV_WS_NO_COPY
#define MLAV_WS_NO_COPY 0
#endif
// MLAV_WS_NO_SOFTMAX=1 (timing-only, garbage results): the S warps skip the softmax (masking,
// the row max exchange, exp2, the row sums) and store their raw scores as P with unit row
// factors, so a tile's S warps run their steps, one group barrier (the exchange's, which also
// keeps P off the k_pe chunks still being read), P's stores and the hand-overs only: what the
// softmax's work costs the critical path end to end (cuda/NOTES.md v34).
#ifndef MLAV_WS_NO_SOFTMAX
#define MLAV_WS_NO_SOFTMAX 0
#endif
// kQrAt < 0: each k_pe chunk's fragments are loaded at its own step, as the latent chunks'
// (MLAV_WS_QL1): 16 registers at a time instead of 32 over five steps.
static_assert(kQrAt < kLatParts, "loaded before the k_pe chunks");
// MLAV_WS_SPAIR=1: the S warps meet once per two chunks (9 group barriers per tile instead of
// 18): a step waits for parts k and k + 1, meets, issues parts k + 4 and k + 5 into the buffers of
// parts k - 2 and k - 1, and computes both chunks (32 mma per warp), so the K fragments of the
// second chunk load under the first chunk's mma. The ring keeps 4 chunks in flight behind the
// two it computes, instead of 5 behind one (cuda/NOTES.md v34).
#ifndef MLAV_WS_SPAIR
#define MLAV_WS_SPAIR 0
#endif
static_assert(MLAV_WS_SPAIR == 0 || MLAV_WS_SPAIR == 1, "0 or 1");
constexpr bool kSPair = MLAV_WS_SPAIR != 0;
// setmaxnreg budgets: 128 x kSRegs + 256 x kPvRegs <= 384 x 168 (the entry budget of 384
// threads under __launch_bounds__(384, 1)), multiples of 8.
#ifndef MLAV_WS_SREGS
#define MLAV_WS_SREGS 136
#endif
constexpr int kSRegs = MLAV_WS_SREGS;
#ifdef MLAV_WS_PVREGS
constexpr int kPvRegs = MLAV_WS_PVREGS;  // compile experiments only
#else
constexpr int kPvRegs = (kThreadsWs * 168 - kSThreads * kSRegs) / kPvThreads / 8 * 8;
#endif
static_assert(kSRegs >= 24 && kSRegs % 8 == 0 && kPvRegs <= 256, "setmaxnreg: 24 .. 256");
// Named barriers (0: the whole block, at the epilogue).
constexpr int kBarS = 1, kBarPv = 2, kBarFull = 3, kBarEmpty = 4;
// MLAV_WS_MBAR=1 (the default since v40): the hand-overs between the groups ("P full", "P
// empty") are mbarriers (arrive; try_wait.parity), which compute-sanitizer racecheck models,
// instead of the named barriers 3 and 4 (bar.arrive on one side, bar.sync on the other: racecheck
// reports every access they order as a hazard; cuda/NOTES.md v32, v33). Phases: "P full"
// completes once per tile (128 S threads arrive), "P empty" once per tile but the last (256 PV
// threads); tile t waits for parity t & 1 and (t - 1) & 1. Neither side can run a phase ahead of
// the other's wait: the S warps arrive "P full" of tile t + 1 only after waiting "P empty" of
// tile t, which the PV warps arrive after waiting "P full" of tile t. The groups' last meeting
// (the PV warps read each row's 1 / l) is a third mbarrier, "1 / l ready" (the S threads arrive
// once, after their row totals; the PV threads wait for phase 0): racecheck followed neither the
// counted bar.sync 0 (v38: every report there) nor the uncounted one (v39: 249 reports, all
// there). With it racecheck reports 0 hazards (v40), and since v41 the objects spill nothing
// on sm_120a or sm_90a. Its cost: as fast as the named barriers at the H100's tensor rate, 1-7%
// slower under the card's emulated rate (K = 2; cuda/NOTES.md v38-v40).
// MLAV_WS_MBAR=0: v30-v37's named-barrier hand-overs (racecheck cannot check them; the sm_120a
// object spills 4 bytes).
// One arrival per warp instead of per thread (v39's MLAV_WS_MBAR=2, removed in v40; its code is
// bench/results/2026-12-07-v40/mbar_per_warp.diff) was no faster, and racecheck does not take
// __syncwarp and lane 0's arrival as ordering the other lanes' accesses (663 reports).
#ifndef MLAV_WS_MBAR
#define MLAV_WS_MBAR 1
#endif
static_assert(MLAV_WS_MBAR == 0 || MLAV_WS_MBAR == 1, "0 or 1");
constexpr bool kMbar = MLAV_WS_MBAR != 0;
// MLAV_WS_SYNC2=1 (with MLAV_WS_MBAR=0): the named-barrier hand-overs with bar.sync on both
// sides (the arriving side waits too), the pattern racecheck follows (v30's probe: 0 hazards
// with bar.sync, 4 with bar.arrive). What it costs: the S warps start the next tile's preamble
// (draft bits, Q's first fragments) only once the PV warps reach "P full", and the PV warps
// leave "P empty" only once the S warps reach it at their next step 0; neither side waits on a
// memory poll (cuda/NOTES.md v34).
#ifndef MLAV_WS_SYNC2
#define MLAV_WS_SYNC2 0
#endif
static_assert(MLAV_WS_SYNC2 == 0 || (MLAV_WS_SYNC2 == 1 && !kMbar), "0, or 1 without MBAR");

// The S ring's and the V ring's schedules (cuda/ws_ring.h): the S ring one part per step, or two
// under MLAV_WS_SPAIR.
template <int kSStages>
__host__ __device__ constexpr ws_ring::Ring s_ring() {
  return {kSStages, kSParts, kSPair ? 2 : 1, kSStages == 6};
}
template <int kVStages>
__host__ __device__ constexpr ws_ring::Ring v_ring() {
  return {kVStages, kVSteps, 1, false};
}
static_assert(kLatParts == ws_ring::kLatParts &&
                  s_ring<6>() == (kSPair ? ws_ring::kSRingBy2 : ws_ring::kSRingBy1) &&
                  (MLAV_WS_VKEYS != 32 || v_ring<4>() == ws_ring::kVRing),
              "the rings tests/cuda/test_ws_ring.cpp runs");
template <int kSStages, int kVStages>
struct Layout {
  // kPInRing (an S ring of 6: 18 parts per tile, so part k is always in buffer k % 6): P has no
  // buffer of its own but lies over the S ring's buffers 4 and 5, which hold the tile's two k_pe
  // chunks (parts 16, 17) when the softmax writes P; the ring keeps them free until the PV warps
  // have P in registers (the S warps' step 0 of the next tile).
  static constexpr bool kPInRing = s_ring<kSStages>().p_in_ring;
  static constexpr int kQ = 0;
  static constexpr int kPOwn = kPInRing ? 0 : kRowsPerBlock * kKvTile * 2;  // P's own bytes
  static constexpr int kSRing = kQ + kRowsPerBlock * kQRowBytes + kPOwn;
  static constexpr int kP = kPInRing ? kSRing + 4 * kChunkBytes : kQ + kRowsPerBlock * kQRowBytes;
  static constexpr int kVRing = kSRing + kSStages * kChunkBytes;
  static constexpr int kRedMax = kVRing + kVStages * kVChunkBytes;   // [2 halves][64]
  static constexpr int kRedSum = kRedMax + 2 * kRowsPerBlock * 4;    // [2 tiles][2][64]
  static constexpr int kRowScale = kRedSum + 4 * kRowsPerBlock * 4;  // [64]
  // [64]; with the mbarriers over red_max, which the epilogue no longer reads (the S warps write
  // 1 / l after the group barrier that follows their last tile's softmax)
  static constexpr int kRowInvL = kMbar ? kRedMax : kRowScale + kRowsPerBlock * 4;
  static constexpr int kVis = kRowScale + kRowsPerBlock * 4 * (kMbar ? 1 : 2);  // [64] uint64
  // With P over the S ring: the latent row of each key of the next tile, from the S warps'
  // loader to the PV warps' ([64] pointers; null past the split), so that the PV warps hold no
  // loader state of their own across a tile (registers, cuda/NOTES.md v31).
  static constexpr bool kRowHandoff = kPInRing && MLAV_WS_HANDOFF != 0;
  static constexpr int kKvRow = kVis + kRowsPerBlock * 8;
  // the mbarriers: "P full", "P empty", "1 / l ready"
  static constexpr int kMbarOff = kKvRow + (kRowHandoff ? kKvTile * 8 : 0);
  static constexpr int kBytes = kMbarOff + (kMbar ? 24 : 0);
};

__device__ __forceinline__ void bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// Barrier 0 over the whole block, the groups' last meeting in the named-barrier forms (the
// mbarrier forms meet on "1 / l ready", see MLAV_WS_MBAR).
__device__ __forceinline__ void block_sync() { bar_sync(0, kThreadsWs); }
// The arriving side of a hand-over, on mbarrier `mbar` or named barrier `id` (the whole block).
// Mbarriers (MLAV_WS_MBAR): every thread arrives. Named barriers: bar.arrive, or under
// MLAV_WS_SYNC2 bar.sync (the arriving side waits too).
__device__ __forceinline__ void handover_arrive(uint32_t mbar, int id) {
  if constexpr (kMbar) {
    mbar_arrive(mbar);
  } else if constexpr (MLAV_WS_SYNC2 != 0) {
    bar_sync(id, kThreadsWs);
  } else {
    bar_arrive(id, kThreadsWs);
  }
}
template <int kRegs>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
// Chunk rows are 64 bytes (4 units): the 8 rows an ldmatrix reads, r0 .. r0 + 7 (r0 % 8 == 0),
// land in 8 distinct 16-byte bank groups when unit u of row r sits at u ^ ((r >> 1) & 3).
__device__ __forceinline__ int cswz(int row, int unit) { return unit ^ ((row >> 1) & 3); }

}  // namespace ws

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL) && \
    !defined(__CUDA_ARCH_FEAT_SM120_ALL)
#error "verify_partial_ws.cu needs an arch-specific target (sm_90a or sm_120a) for setmaxnreg"
#endif

#ifdef MLAV_WS_TRACE
// Timing-only builds (-DMLAV_WS_TRACE; never the kernel): thread 0 of each group adds up
// clock() cycles per block: [0] tiles, S warps: [1] loop, [2] chunk waits (wait_group and the
// group barrier), [3] softmax to "P full", [4] the "P empty" wait (the softmax's with P in its
// own buffer, step 0's with P over the S ring); PV warps: [5] loop, [6] chunk waits, [7] the
// "P full" wait. Printed per launch at the next prepare and at exit.
constexpr unsigned kWsTraceBlocks = 4096;
static __device__ unsigned long long g_ws_trace[kWsTraceBlocks][8];
#define MLAV_WT(...) __VA_ARGS__
#else
#define MLAV_WT(...)
#endif

template <int kSStages, int kVStages>
__global__ void __launch_bounds__(ws::kThreadsWs, 1)
    verify_partial_ws(const __grid_constant__ PartialArgs args) {
  using namespace ws;
  using L = Layout<kSStages, kVStages>;
  static_assert(kSStages >= 2 && kVStages >= 2, "double buffering at least");
  const VerifyParams& p = args.p;
  const BlockUnit unit = block_unit(args);
  if (!unit.valid) return;
  const int32_t req = unit.req;
  const bool is_draft = unit.split == p.num_splits;
  const RequestExtent e = request_extent(p, req);
  const int32_t H = p.num_heads;
  const int64_t valid_rows = static_cast<int64_t>(e.draft_nodes) * H;
  const int64_t row0 = static_cast<int64_t>(unit.row_tile) * kRows;
  if (row0 >= valid_rows) return;
  int64_t key_begin = 0, key_end = e.draft_nodes;
  if (!is_draft) {
    SplitRange r = split_range(e.prefix_len, plan_splits(args, req), unit.split);
    if (r.empty()) return;  // the merge skips empty splits by the same split_range
    key_begin = r.begin;
    key_end = r.end;
  }
  const int num_tiles = static_cast<int>((key_end - key_begin + kKvTile - 1) / kKvTile);

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t sbase = smem_addr(smem_raw);
  float* red_max = reinterpret_cast<float*>(smem_raw + L::kRedMax);
  float* red_sum = reinterpret_cast<float*>(smem_raw + L::kRedSum);
  float* row_scale = reinterpret_cast<float*>(smem_raw + L::kRowScale);
  float* row_inv_l = reinterpret_cast<float*>(smem_raw + L::kRowInvL);
  uint64_t* vis_s = reinterpret_cast<uint64_t*>(smem_raw + L::kVis);
  const __nv_bfloat16** kv_row_s = reinterpret_cast<const __nv_bfloat16**>(smem_raw + L::kKvRow);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const uint32_t bar_full = sbase + L::kMbarOff, bar_empty = bar_full + 8, bar_inv = bar_full + 16;
  if constexpr (kMbar) {
    if (tid == 0) {
      mbar_init(bar_full, kSThreads);
      mbar_init(bar_empty, kPvThreads);
      mbar_init(bar_inv, kSThreads);
    }
    __syncthreads();
  }
  const int frag_row = lane >> 2;       // C fragment row within a 16-row tile (and + 8)
  const int frag_col = (lane & 3) * 2;  // C fragment column pair within an n8 tile
  const int mi = lane >> 3, mr = lane & 7;
  const uint32_t xa0 = ((lane >> 4) ^ mr) * 16;  // A operands (Q, P): unit bit b = lane / 16

  // ---- the chunk loader of either group: key ld_key of a tile, 16-byte units from ld_unit ----
  const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  const bool slots_from_indices = !(is_draft && p.draft_source == DraftKvSource::ExtendRows);
  const int64_t index_base = e.kv_begin + (is_draft ? e.prefix_len : 0);
  const bool s_group = tid < kSThreads;
  const int gt = s_group ? tid : tid - kSThreads;  // thread within the group
  const int ld_key = s_group ? gt >> 1 : gt >> 2;
  // The S warps' two units of a 64-byte chunk row: ld_unit and + 1, or with
  // MLAV_KV_WHOLE_SECTORS ld_unit (0 or 1) and + 2, so that each warp-wide copy reads whole
  // 32-byte sectors (cuda/NOTES.md v32). The PV warps copy one unit per thread (whole sectors).
  constexpr int kUnitGap = MLAV_KV_WHOLE_SECTORS != 0 ? 2 : 1;  // S loader: units apart
  const int ld_unit = s_group ? (gt & 1) * (kUnitGap == 1 ? 2 : 1) : gt & 3;
  auto slot_of = [&](int tile) -> int64_t {
    const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + ld_key;
    return (tile < num_tiles && key < key_end) ? p.kv_indices[index_base + key] : 0;
  };
  // Nothing here is loaded or computed before the groups' setmaxnreg: each group reads tile 0's
  // slot after it (fetch_slot(0) right after its setmaxnreg). A value live across setmaxnreg went
  // to local memory in both groups: v30's form spilled 80 bytes on sm_120a for next_slot, or for
  // lat_src's initial pool pointer once next_slot was moved (cuda/NOTES.md v37).
  int64_t next_slot = 0;
  const __nv_bfloat16* lat_src = nullptr;   // this thread's first unit of the key's latent row
  const __nv_bfloat16* rope_src = nullptr;  // and of its k_pe row (the S warps' loader)
  int src_bytes = 0;
  // The latent row of key `key` (absolute) whose slot is `slot` (k_extend rows are latent-first).
  auto latent_row = [&](int64_t key, int64_t slot) -> const __nv_bfloat16* {
    return slots_from_indices ? pool + p.kv_layout.latent_index(slot)
                              : static_cast<const __nv_bfloat16*>(p.k_extend) +
                                    (e.q_begin + key) * p.k_extend_stride;
  };
  auto enter_tile = [&](int tile) {
    const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + ld_key;
    const bool ok = tile < num_tiles && key < key_end;
    src_bytes = ok ? 16 : 0;
    const __nv_bfloat16* lat_row = nullptr;
    if (!ok) {
      lat_src = rope_src = pool;  // never read (src-size 0), but a valid address
    } else if (!slots_from_indices) {
      lat_row = latent_row(key, 0);
      lat_src = lat_row + ld_unit * 8;
      rope_src = lat_row + kLatentDim + ld_unit * 8;
    } else {
      lat_row = latent_row(key, next_slot);
      lat_src = lat_row + ld_unit * 8;
      rope_src = pool + p.kv_layout.rope_index(next_slot) + ld_unit * 8;
    }
    // The S warps enter a tile one tile before the PV warps: its rows for them (read after the
    // "P full" of the tile before, rewritten only after their "P empty" of it).
    // With MLAV_WS_SLAT the S warps' own latent copies read it there too (no lat_src held across
    // the tile): published to the key's other thread by the warp barrier.
    if constexpr (L::kRowHandoff)
      if (s_group) {
        if ((gt & 1) == 0 && (tile > 0 || kSLat)) kv_row_s[ld_key] = lat_row;
        if constexpr (kSLat) __syncwarp();
      }
  };
  // The slot of the loader's key in `tile`, read as the loader enters the tile before (its
  // latency hidden by a tile's steps).
  auto fetch_slot = [&](int tile) {
    if (slots_from_indices) next_slot = slot_of(tile);
  };
  const uint32_t ld_dst = ld_key * kRowBytes + cswz(ld_key, ld_unit) * 16;
  auto copy16 = [&](uint32_t dst, const __nv_bfloat16* src) {
    // Timing-only (garbage results): MLAV_WS_NO_COPY=1 issues no chunk copies (the loop's time
    // without the KV stream, cuda/NOTES.md v30); 2 none of the V ring's, 3 none of the S ring's.
    if constexpr (MLAV_WS_NO_COPY == 1)
      if (src_bytes >= 0) return;
    if constexpr (MLAV_WS_NO_COPY == 2)
      if (!s_group) return;
    if constexpr (MLAV_WS_NO_COPY == 3)
      if (s_group) return;
    cp_async16(dst, src, src_bytes);
  };
  // (trace builds: this thread's chunk-step waits)
  MLAV_WT(unsigned wt_wait = 0;)
  // One chunk step of a group's ring of kStages buffers at `ring` (kParts chunks per tile, kWidth
  // parts per step; the arithmetic is cuda/ws_ring.h's): waits for parts kPart .. kPart +
  // kWidth - 1, meets the group (kN threads) on barrier kBar, then issues the kWidth chunks
  // ws_ring::ahead past them into the buffers the group has just finished with (entering the next
  // tile where a chunk lies there) and returns part kPart's buffer (the step's next part is in
  // the buffer after it).
  auto ring_step =
      [&]<int kStages, int kParts, int kWidth, int kBar, int kN, int kPart, int kBytes>(
          auto& issue, auto& fetch, auto& enter, uint32_t ring, int& rd, int tile) -> uint32_t {
    constexpr ws_ring::Ring kR{kStages, kParts, kWidth, false};
    static_assert(kParts % kWidth == 0 && kPart % kWidth == 0 && kStages % kWidth == 0);
    MLAV_WT(const unsigned w0 = static_cast<unsigned>(clock());)
    cp_async_wait<ws_ring::pending(kR)>();
    bar_sync(kBar, kN);
    MLAV_WT(wt_wait += static_cast<unsigned>(clock()) - w0;)
    static_for<0, kWidth>([&]<int kI>() {
      constexpr int ahead_part = ws_ring::issue_part(kR, kPart, kI);
      if constexpr (ahead_part == 0) {
        enter(tile + ws_ring::issue_tiles_ahead(kR, kPart, kI));
        fetch(tile + ws_ring::issue_tiles_ahead(kR, kPart, kI) + 1);
      }
      // the buffer of the part kWidth before part kPart + kI (rd: part kPart's)
      const int wr = rd == 0 ? kStages - kWidth + kI : rd - kWidth + kI;
      issue.template operator()<ahead_part>(ring + wr * kBytes);
      cp_async_commit();
    });
    const uint32_t buf = ring + rd * kBytes;
    rd = rd + kWidth == kStages ? 0 : rd + kWidth;
    return buf;
  };

  if (s_group) {
    // =========================== S warps: S = Q K^T, softmax, P ===========================
    regs_dec<kSRegs>();
    fetch_slot(0);  // tile 0's slot, its latency under Q's copies
    MLAV_WT(unsigned wt[4] = {};)  // [0] loop start, [2] softmax, [3] "P empty" wait
#if MLAV_WS_EXP == 2
    if (tid >= 0) return;
#endif
    const int warp = tid >> 5;
    const int rq = warp >> 1;  // rows rq * 32 .. + 31 (two m16 tiles)
    const int kq = warp & 1;   // keys kq * 32 .. + 31 of each tile (four n8 tiles)
    // Q's latent columns in shared memory: 64 rows x kQUnits units, rows past the request
    // zero-filled.
    const __nv_bfloat16* qbase = static_cast<const __nv_bfloat16*>(p.q);
    for (int u = tid; u < kRows * kQUnits; u += kSThreads) {
      const int r = u / kQUnits, qu = u % kQUnits;
      const int64_t row = row0 + r;
      const bool ok = row < valid_rows;
      const int64_t t = ok ? row / H : 0, h = ok ? row % H : 0;
      const __nv_bfloat16* src = qbase + (e.q_begin + t) * p.q_token_stride + h * p.q_head_stride +
                                 p.q_latent_offset + qu * 8;
      cp_async16(sbase + L::kQ + r * kQRowBytes + swz(r, qu) * 16, ok ? src : qbase, ok ? 16 : 0);
    }
    cp_async_commit();
    // Q's k_pe A fragments (rows rq * 32 + mt * 16 + frag_row (+ 8), columns ks * 16 + frag_col
    // (+ 8)) come from global memory (L1 after the first tile), loaded during the last latent
    // chunks of every tile; the row pointers stay. Rows past the request read the tile's first
    // row (their scores are never stored, and a row's scores depend on its own Q row only).
    const unsigned int* qa[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int64_t r = row0 + rq * 32 + mt * 16 + frag_row + 8 * hr;
        const int64_t row = r < valid_rows ? r : row0;
        qa[mt][hr] = reinterpret_cast<const unsigned int*>(
            qbase + (e.q_begin + row / H) * p.q_token_stride + (row % H) * p.q_head_stride +
            p.q_rope_offset + frag_col);
      }
    // From qa[..] to the same row's latent columns, in 4-byte words.
    const int64_t q_lat_delta = (p.q_latent_offset - p.q_rope_offset) / 2;
    uint32_t qr[2][kRopeDim / 16][4];
    auto load_qr = [&] {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int ks = 0; ks < kRopeDim / 16; ++ks) {
          qr[mt][ks][0] = __ldg(qa[mt][0] + ks * 8);
          qr[mt][ks][1] = __ldg(qa[mt][1] + ks * 8);
          qr[mt][ks][2] = __ldg(qa[mt][0] + ks * 8 + 4);
          qr[mt][ks][3] = __ldg(qa[mt][1] + ks * 8 + 4);
        }
    };

    const uint32_t ring = sbase + L::kSRing;
    // This thread's first unit of its key's latent row, from the hand-over table (null past the
    // split: src_bytes is 0, any valid address will do).
    auto table_lat = [&]() -> const __nv_bfloat16* {
      const __nv_bfloat16* row = kv_row_s[ld_key];
      return row != nullptr ? row + ld_unit * 8 : pool;
    };
    // With kRowEarly: table_lat() as the step read it before its barrier. The table changes only
    // where this thread's key pair enters a tile (enter_tile, part 0's step), so the read before
    // the barrier is the read after it for every other part.
    const __nv_bfloat16* s_lat = pool;
    // Issues part kPart (0 .. 17) of the loader's tile into buffer `buf`: latent columns
    // kPart * 32 .., or k_pe columns (kPart - 16) * 32 ..; two units per thread.
    auto issue = [&]<int kPart>(uint32_t buf) {
      const __nv_bfloat16* src;
      if constexpr (kPart < kLatParts && L::kRowHandoff && kSLat) {
        if constexpr (kSPair && kRowEarly && kPart == 0) {
          // the step's second part (1) follows it in the same step, after this entry
          s_lat = table_lat();
          src = s_lat;
        } else {
          src = (kRowEarly && kPart != 0 ? s_lat : table_lat()) + kPart * kCols;
        }
      } else {
        src = kPart < kLatParts ? lat_src + kPart * kCols : rope_src + (kPart - kLatParts) * kCols;
      }
      // unit ld_unit + kUnitGap: physical (ld_unit ^ s) ^ kUnitGap (no carry: the two
      // units' bits are disjoint)
      copy16(buf + ld_dst, src);
      copy16(buf + (ld_dst ^ (kUnitGap * 16)), src + kUnitGap * 8);
    };
    auto skip_issue = [&]<int kPart>(uint32_t) {};
    // The S ring's schedule (tests/cuda/test_ws_ring.cpp runs it).
    constexpr ws_ring::Ring kSR = ws::s_ring<kSStages>();
    static_assert(!L::kPInRing || (ws_ring::p_ring_ok(kSR) && ws_ring::p_buffer(kSR) == 4 &&
                                   L::kP == L::kSRing + 4 * kChunkBytes),
                  "P over the buffers of the tile's last two parts");
    static_assert(!kSPair || L::kPInRing, "pairs: the ring of 6 with P in it");
    static_assert(!kSPair || MLAV_WS_ROW_EARLY != 2, "pairs read the table before each step");
    // (MLAV_WS_NO_SOFTMAX skips the softmax's "P empty" wait where P has its own bytes)
    static_assert(MLAV_WS_NO_SOFTMAX == 0 || L::kPInRing, "no softmax: with P in the ring only");
    enter_tile(0);
    fetch_slot(1);
    if constexpr (kRowEarly) s_lat = table_lat();
    static_for<0, ws_ring::ahead(kSR)>([&]<int kP>() {
      issue.template operator()<kP>(ring + kP * kChunkBytes);
      cp_async_commit();
    });
    // Q (the oldest group) landed and published to every S warp: the hoisted Q fragments of a
    // step are read before that step's barrier, so the first step's barrier cannot publish Q
    // (call 8: the property suite and racecheck caught tile 0's first fragments racing Q's copies).
    cp_async_wait<ws_ring::ahead(kSR)>();
    bar_sync(kBarS, kSThreads);
    int rd = 0;
    uint32_t step_buf = 0;  // the step's first buffer (its second part's is the next)
    auto step = [&]<int kPart>(int tile) -> uint32_t {
      constexpr ws_ring::Ring kR = ws::s_ring<kSStages>();
      if constexpr (kPart % kR.width != 0) {
        return step_buf + kChunkBytes;
      } else {
        if constexpr (kRowEarly && MLAV_WS_ROW_EARLY == 1)
          if constexpr (kR.width == 2 || ws_ring::reads_table(kR, kPart, kLatParts))
            s_lat = table_lat();
        if constexpr (ws_ring::waits_p_empty(kR, kPart)) {
          if (tile > 0) {
            // P's buffers are P's until the PV warps hold it in registers.
            MLAV_WT(const unsigned we0 = static_cast<unsigned>(clock());)
            if constexpr (kMbar)
              mbar_wait(bar_empty, (tile - 1) & 1);
            else
              bar_sync(kBarEmpty, kThreadsWs);
            MLAV_WT(wt[3] += static_cast<unsigned>(clock()) - we0;)
            if constexpr (kR.width == 1) {
              // the part the tile's last step left out (the ring step below issues the next)
              issue.template operator()<ws_ring::deferred_part(kR)>(ring + ws_ring::p_buffer(kR) *
                                                                               kChunkBytes);
              cp_async_commit();
            }
          }
        }
        if constexpr (ws_ring::skips_issue(kR, kPart)) {
          // The part after would go to P's first buffer, where P is about to be written: an
          // empty group keeps the count of groups per step, and step 0 issues it.
          step_buf = ring_step.template
                     operator()<kSStages, kSParts, kR.width, kBarS, kSThreads, kPart, kChunkBytes>(
                         skip_issue, fetch_slot, enter_tile, ring, rd, tile);
        } else {
          step_buf = ring_step.template
                     operator()<kSStages, kSParts, kR.width, kBarS, kSThreads, kPart, kChunkBytes>(
                         issue, fetch_slot, enter_tile, ring, rd, tile);
        }
        // (the table holds the next step's tile: a step that enters one writes it before issuing)
        if constexpr (kRowEarly && MLAV_WS_ROW_EARLY == 2)
          if constexpr (ws_ring::reads_table(kR, (kPart + 1) % kSParts, kLatParts))
            s_lat = table_lat();
        return step_buf;
      }
    };

    const uint32_t q_lane0 = sbase + L::kQ + (rq * 32 + (lane & 15)) * kQRowBytes;
    // K fragments: key kq * 32 + pair * 16 + (mi / 2) * 8 + mr, unit kk * 2 + (mi & 1).
    const uint32_t kb_lane = (kq * 32 + (mi >> 1) * 8 + mr) * kRowBytes;
    const uint32_t xk = ((mi & 1) ^ ((mr >> 1) & 3)) * 16;
    const float scale_log2 = p.sm_scale * 1.4426950408889634f;
    float m_run[2][2], l_run[2][2], scale_prev[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) m_run[mt][hr] = -FLT_MAX, l_run[mt][hr] = 0.f;
    const uint32_t p_base = sbase + L::kP;
    // P's store address for fragment (mt, n, hr): row r = rq * 32 + mt * 16 + frag_row + 8 * hr,
    // keys kq * 32 + n * 8 + frag_col. The row's 16-byte unit is swz(r, kq * 4 + n), which is
    // (kq * 4 + n) ^ frag_row because r & 7 == frag_row; written so, the 16 addresses are one
    // base, four unit offsets and immediates (held as 16 addresses they spilled on sm_90a).
    unsigned char* const p_row = smem_raw + L::kP +
                                 ((rq * 32 + frag_row) * kKvTile + frag_col) * 2;
    auto p_store = [&](int mt, int n, int hr, float lo, float hi) {
      const int unit = (kq * 4 + n) ^ frag_row;
      *reinterpret_cast<__nv_bfloat162*>(p_row + ((mt * 16 + 8 * hr) * kKvTile + unit * 8) * 2) =
          __floats2bfloat162_rn(lo, hi);
    };
    // l of tile `tile` (split_plan.h numerics 2, the kernel's order): l * scale + (the two
    // halves' sums), applied one tile late so that the halves' sums cross on the next barrier.
    auto fold_sums = [&](int tile) {
      const float* sums = red_sum + (tile & 1) * 2 * kRows;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = rq * 32 + mt * 16 + frag_row + 8 * hr;
          l_run[mt][hr] = l_run[mt][hr] * scale_prev[mt][hr] + (sums[r] + sums[kRows + r]);
        }
    };

    MLAV_WT(wt[0] = static_cast<unsigned>(clock()); unsigned ws0 = 0;)
#pragma unroll 1
    for (int tile = 0; tile < num_tiles; ++tile) {
      const int64_t tile_key0 = key_begin + static_cast<int64_t>(tile) * kKvTile;
      // Draft visibility words, one per row (bit k: the row's node sees node tile_key0 + k), two
      // threads per row; read after the S pass, its group barriers later.
      if (is_draft) {
        const int r = tid >> 1, hk = tid & 1;
        const int64_t row = row0 + r;
        uint64_t bits = 0;
        if (row < valid_rows)
          bits = static_cast<uint64_t>(mask_row(p, req, e, static_cast<int32_t>(row / H))
                                           .template bits<32, 4>(tile_key0 + hk * 32, key_end))
                 << (hk * 32);
        bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
        if (hk == 0) vis_s[r] = bits;
      }
      float s_acc[2][4][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
          for (int f = 0; f < 4; ++f) s_acc[mt][n][f] = 0.f;

      static_for<0, kSParts>([&]<int kPart>() {
        // Q's A fragments of the chunk's two k16 steps (Q is resident: loaded before the step's
        // wait and barrier, so their latency overlaps them; MLAV_WS_HOIST=0 loads them after).
        uint32_t aq[2][2][4];
        auto load_aq = [&] {
          if constexpr (kPart >= kQSmemParts && (kPart < kLatParts || kQrAt < 0)) {
            // Q's chunk from global memory (a latent one under MLAV_WS_QL1: the k_pe loads'
            // pointers, moved to the latent columns; both offsets are 16-byte aligned).
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
              const int64_t w = kPart < kLatParts ? q_lat_delta + (kPart * 2 + kk) * 8
                                                  : ((kPart - kLatParts) * 2 + kk) * 8;
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                aq[kk][mt][0] = __ldg(qa[mt][0] + w);
                aq[kk][mt][1] = __ldg(qa[mt][1] + w);
                aq[kk][mt][2] = __ldg(qa[mt][0] + w + 4);
                aq[kk][mt][3] = __ldg(qa[mt][1] + w + 4);
              }
            }
          } else if constexpr (kPart < kLatParts) {
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
              const int ks = kPart * 2 + kk;  // Q's k16 step: units ks * 2 + {0, 1}
#pragma unroll
              for (int mt = 0; mt < 2; ++mt)
                ldmatrix_x4(
                    q_lane0 + mt * 16 * kQRowBytes + (ks >> 2) * 128 + (xa0 ^ ((ks & 3) * 32)),
                    aq[kk][mt][0], aq[kk][mt][1], aq[kk][mt][2], aq[kk][mt][3]);
            }
          }
        };
        if constexpr (MLAV_WS_HOIST != 0) load_aq();
        const uint32_t buf = step.template operator()<kPart>(tile);
        if constexpr (MLAV_WS_HOIST == 0) load_aq();
        if constexpr (kQrAt >= 0 && kPart == kQrAt) load_qr();
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t a[2][4];
          if constexpr (kPart < kLatParts || kQrAt < 0) {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int f = 0; f < 4; ++f) a[mt][f] = aq[kk][mt][f];
          } else {
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int f = 0; f < 4; ++f) a[mt][f] = qr[mt][(kPart - kLatParts) * 2 + kk][f];
          }
#pragma unroll
          for (int pair = 0; pair < 2; ++pair) {
            uint32_t b[4];
            ldmatrix_x4(buf + kb_lane + pair * 16 * kRowBytes + ((kk * 32) ^ xk), b[0], b[1], b[2],
                        b[3]);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma_bf16(s_acc[mt][pair * 2], a[mt], b[0], b[1]);
              mma_bf16(s_acc[mt][pair * 2 + 1], a[mt], b[2], b[3]);
            }
          }
        }
      });

      MLAV_WT(ws0 = static_cast<unsigned>(clock());)
      if constexpr (MLAV_WS_NO_SOFTMAX != 0) {
        // (the group barrier that the softmax's max exchange gives: every S warp has read its
        // k_pe chunks before P is written over them)
        bar_sync(kBarS, kSThreads);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int hr = 0; hr < 2; ++hr)
            if (kq == 0 && (lane & 3) == 0) row_scale[rq * 32 + mt * 16 + frag_row + 8 * hr] = 1.f;
#pragma unroll
          for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
              p_store(mt, n, hr, s_acc[mt][n][2 * hr], s_acc[mt][n][2 * hr + 1]);
        }
        handover_arrive(bar_full, kBarFull);
        continue;
      }
      // ---- online softmax over the tile (split_plan.h numerics 2; the kernel's arithmetic) ----
      const int64_t left = key_end - tile_key0;
      const int key_limit = left < kKvTile ? static_cast<int>(left) : kKvTile;
      const int limit_in_half = key_limit - kq * 32;
      const uint32_t in_split = limit_in_half >= 32  ? ~0u
                                : limit_in_half <= 0 ? 0u
                                                     : (1u << limit_in_half) - 1u;
      float tile_max[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t vm[2];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          uint32_t vis = ~0u;
          if (is_draft)
            vis = static_cast<uint32_t>(vis_s[rq * 32 + mt * 16 + frag_row + 8 * hr] >> (kq * 32));
          vm[hr] = (vis & in_split) >> frag_col;
          tile_max[mt][hr] = -INFINITY;
        }
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
          for (int f = 0; f < 4; ++f) {
            const int hr = f >> 1;
            const bool visible = (vm[hr] >> (n * 8 + (f & 1))) & 1u;
            const float t = visible ? s_acc[mt][n][f] * scale_log2 : -INFINITY;
            s_acc[mt][n][f] = t;
            tile_max[mt][hr] = fmaxf(tile_max[mt][hr], t);
          }
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          float m = tile_max[mt][hr];
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
          m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
          if ((lane & 3) == 0) red_max[kq * kRows + rq * 32 + mt * 16 + frag_row + 8 * hr] = m;
        }
      }
      bar_sync(kBarS, kSThreads);
      if (tile > 0) fold_sums(tile - 1);
      float m_new[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = rq * 32 + mt * 16 + frag_row + 8 * hr;
          m_new[mt][hr] = fmaxf(m_run[mt][hr], fmaxf(red_max[r], red_max[kRows + r]));
          scale_prev[mt][hr] = softmax_exp2(m_run[mt][hr] - m_new[mt][hr]);
          m_run[mt][hr] = m_new[mt][hr];
        }
      // The PV warps hold the previous P and row factors in registers (with P over the S ring
      // this was waited for at step 0 of the tile, before its buffers were re-filled).
      MLAV_WT(const unsigned we0 = static_cast<unsigned>(clock());)
      if (!L::kPInRing && tile > 0) {
        if constexpr (kMbar)
          mbar_wait(bar_empty, (tile - 1) & 1);
        else
          bar_sync(kBarEmpty, kThreadsWs);
      }
      MLAV_WT(wt[3] += static_cast<unsigned>(clock()) - we0;)
      float part_sum[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
          if (kq == 0 && (lane & 3) == 0)
            row_scale[rq * 32 + mt * 16 + frag_row + 8 * hr] = scale_prev[mt][hr];
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const float p0 = softmax_exp2(s_acc[mt][n][2 * hr] - m_new[mt][hr]);
            const float p1 = softmax_exp2(s_acc[mt][n][2 * hr + 1] - m_new[mt][hr]);
            part_sum[mt][hr] += p0 + p1;
            p_store(mt, n, hr, p0, p1);
          }
      }
      float* sums = red_sum + (tile & 1) * 2 * kRows + kq * kRows;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          float s = part_sum[mt][hr];
          s += __shfl_xor_sync(0xffffffffu, s, 1);
          s += __shfl_xor_sync(0xffffffffu, s, 2);
          if ((lane & 3) == 0) sums[rq * 32 + mt * 16 + frag_row + 8 * hr] = s;
        }
      // P and the row factors of this tile are in smem
      handover_arrive(bar_full, kBarFull);
      MLAV_WT(wt[2] += static_cast<unsigned>(clock()) - ws0;)
    }
#ifdef MLAV_WS_TRACE
    if (tid == 0) {
      const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      if (b < kWsTraceBlocks) {
        unsigned long long* t = g_ws_trace[b];
        t[0] = num_tiles, t[1] = static_cast<unsigned>(clock()) - wt[0], t[2] = wt_wait;
        t[3] = wt[2], t[4] = wt[3];
      }
    }
#endif
    cp_async_wait<0>();
    bar_sync(kBarS, kSThreads);  // the partner's sums of the last tile
    fold_sums(num_tiles - 1);
    // The S layout owns l and m: lse to the workspace, 1 / l to the PV warps through smem.
    const int64_t partial = unit.split;
    if (kq == 0 && (lane & 3) == 0) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
          store_row_totals(args, partial, e, row0, valid_rows,
                           rq * 32 + mt * 16 + frag_row + 8 * hr, l_run[mt][hr], m_run[mt][hr],
                           row_inv_l);
    }
    // the PV warps' epilogue reads row_inv_l
    if constexpr (kMbar)
      handover_arrive(bar_inv, 0);
    else
      block_sync();
    return;
  }

  // ============================== PV warps: O += P V ==============================
  regs_inc<kPvRegs>();
  fetch_slot(0);
  MLAV_WT(unsigned wt[3] = {};)  // [0] loop start, [2] "P full" wait
#if MLAV_WS_EXP == 1
  if (tid >= 0) return;
#endif
  const int pw = gt >> 5;  // 0 .. 7
  const int rh = pw >> 2;  // rows rh * 32 .. + 31 (two m16 tiles)
  const int cq = pw & 3;   // columns cq * 8 .. + 7 of every 32-column chunk (one n8 tile)
  const uint32_t ring = sbase + L::kVRing;
  // With the row hand-over lat_src is null past the split (the select below keeps src-size and
  // address in one register pair: no src_bytes of its own).
  // Step kPart's chunk: columns (kPart / kVHalves) * 32 .., keys of half kPart % kVHalves (with
  // half-tile chunks only the threads whose key lies there copy; the others commit an empty
  // group, so every step still has one).
  const uint32_t v_dst = ld_dst - (kVHalves == 2 ? (ld_key & 32) * kRowBytes : 0);
  auto issue = [&]<int kPart>(uint32_t buf) {
    constexpr int col = (kPart / kVHalves) * kCols;
    if constexpr (kVHalves == 2)
      if ((ld_key >> 5) != kPart % 2) return;
    if constexpr (L::kRowHandoff) {
      if constexpr (MLAV_WS_NO_COPY == 1 || MLAV_WS_NO_COPY == 2) return;
      if constexpr (kPvRow0) {
        if (lat_src != nullptr) cp_async16(buf + v_dst, lat_src + col, 16);
      } else {
        cp_async16(buf + v_dst, lat_src != nullptr ? lat_src + col : pool,
                   lat_src != nullptr ? 16 : 0);
      }
    } else {
      copy16(buf + v_dst, lat_src + col);
    }
  };
  enter_tile(0);
  if constexpr (L::kRowHandoff) {
    if (src_bytes == 0) lat_src = nullptr;  // the hand-over's form of "past the split"
    if (kPvRow0 && lat_src == nullptr) {
      // tile 0's first key (the split is not empty, so there is one)
      const int64_t slot0 = slots_from_indices ? p.kv_indices[index_base + key_begin] : 0;
      lat_src = latent_row(key_begin, slot0) + ld_unit * 8;
    }
  } else {
    fetch_slot(1);
  }
  static_for<0, ws_ring::ahead(ws::v_ring<kVStages>())>([&]<int kP>() {
    issue.template operator()<kP>(ring + kP * kVChunkBytes);
    cp_async_commit();
  });
  int rd = 0;
  // With the row hand-over the PV warps' loader takes the next tile's rows from the S warps
  // (read below, after "P full"); otherwise it is the S warps' loader.
  const __nv_bfloat16* next_row = nullptr;
  auto no_fetch = [&](int) {};
  auto enter_row = [&](int) { lat_src = next_row != nullptr ? next_row + ld_unit * 8 : nullptr; };
  auto step = [&]<int kPart>(int tile) -> uint32_t {
    if constexpr (L::kRowHandoff)
      return ring_step
          .template operator()<kVStages, kVSteps, 1, kBarPv, kPvThreads, kPart, kVChunkBytes>(
              issue, no_fetch, enter_row, ring, rd, tile);
    else
      return ring_step
          .template operator()<kVStages, kVSteps, 1, kBarPv, kPvThreads, kPart, kVChunkBytes>(
              issue, fetch_slot, enter_tile, ring, rd, tile);
  };
  // [chunk][m16 tile][fragment]: rows rh * 32 .. + 31, columns c * 32 + cq * 8 .. + 7.
  float acc[kVParts][2][4];
#pragma unroll
  for (int c = 0; c < kVParts; ++c)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int f = 0; f < 4; ++f) acc[c][mt][f] = 0.f;
  const uint32_t p_lane = sbase + L::kP + (rh * 32 + (lane & 15)) * kKvTile * 2;
  // V fragments (ldmatrix .trans): keys ks2 * 32 + mi * 8 + mr, unit cq: matrices 0, 1 are
  // k16 step 2 ks2's two 8-key halves, 2, 3 step 2 ks2 + 1's.
  const uint32_t vb_lane = (mi * 8 + mr) * kRowBytes + cswz(mr, cq) * 16;

  MLAV_WT(wt[0] = static_cast<unsigned>(clock());)
#pragma unroll 1
  for (int tile = 0; tile < num_tiles; ++tile) {
    MLAV_WT(const unsigned wf0 = static_cast<unsigned>(clock());)
    // this tile's P and row factors
    if constexpr (kMbar)
      mbar_wait(bar_full, tile & 1);
    else
      bar_sync(kBarFull, kThreadsWs);
    MLAV_WT(wt[2] += static_cast<unsigned>(clock()) - wf0;)
    float pv_scale[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        pv_scale[mt][hr] = row_scale[rh * 32 + mt * 16 + frag_row + 8 * hr];
    uint32_t pa[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldmatrix_x4(p_lane + mt * 16 * kKvTile * 2 + (xa0 ^ (ks * 32)), pa[mt][ks][0],
                    pa[mt][ks][1], pa[mt][ks][2], pa[mt][ks][3]);
    if constexpr (L::kRowHandoff) {
      next_row = kv_row_s[ld_key];
      // past the split: the tile's first key (null only for a tile past the last)
      if (kPvRow0 && next_row == nullptr) next_row = kv_row_s[0];
    }
    if (tile + 1 < num_tiles) {
      handover_arrive(bar_empty, kBarEmpty);
    }
#pragma unroll
    for (int c = 0; c < kVParts; ++c)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        acc[c][mt][0] *= pv_scale[mt][0];
        acc[c][mt][1] *= pv_scale[mt][0];
        acc[c][mt][2] *= pv_scale[mt][1];
        acc[c][mt][3] *= pv_scale[mt][1];
      }
    static_for<0, kVSteps>([&]<int kStep>() {
      const uint32_t buf = step.template operator()<kStep>(tile);
      constexpr int kC = kStep / kVHalves;  // the column chunk
#pragma unroll
      for (int h = 0; h < 2 / kVHalves; ++h) {
        const int ks2 = kVHalves == 2 ? kStep % 2 : h;  // keys ks2 * 32 .. + 31 of the tile
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(buf + vb_lane + (kVHalves == 2 ? 0 : h * 32 * kRowBytes), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16(acc[kC][mt], pa[mt][ks2 * 2], b0, b1);
          mma_bf16(acc[kC][mt], pa[mt][ks2 * 2 + 1], b2, b3);
        }
      }
    });
  }
#ifdef MLAV_WS_TRACE
  if (gt == 0) {
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (b < kWsTraceBlocks) {
      unsigned long long* t = g_ws_trace[b];
      t[5] = static_cast<unsigned>(clock()) - wt[0], t[6] = wt_wait, t[7] = wt[2];
    }
  }
#endif
  cp_async_wait<0>();
  // 1 / l of every row (the S warps' epilogue)
  if constexpr (kMbar)
    mbar_wait(bar_inv, 0);
  else
    block_sync();
  // ---- the normalized partial (split_plan.h numerics 3) ----
  const int64_t partial = unit.split;
  const int64_t rows_total = p.max_total_q * H;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rh * 32 + mt * 16 + frag_row + 8 * hr;
      const int64_t row = row0 + r;
      if (row >= valid_rows) continue;
      const int64_t out_row = (e.q_begin + row / H) * H + row % H;
      const float inv = row_inv_l[r];
      float* o = args.ws_o + (partial * rows_total + out_row) * kLatentDim;
#pragma unroll
      for (int c = 0; c < kVParts; ++c) {
        const int col = c * kCols + cq * 8 + frag_col;
        *reinterpret_cast<float2*>(o + col) =
            make_float2(acc[c][mt][2 * hr] * inv, acc[c][mt][2 * hr + 1] * inv);
      }
    }
}

// ---- the variant's instantiation and launcher (declared in cuda/launch.h) ----
namespace {
// MLAV_WS_STAGES=n (timing-only, cuda/NOTES.md v30): both rings n chunks deep, past the sm_120
// budget (the H200 takes up to 227 KB): what bytes in flight buy the design. v30's figures for
// it and for MLAV_WS_SSTAGES were taken with 64-key V chunks: add -DMLAV_WS_VKEYS=64.
#if defined(MLAV_WS_SSTAGES) && !defined(MLAV_WS_STAGES)
// The 6 buffers beside P divided otherwise between the rings (kWsS + kWsV == 6, in 64-key V
// chunks).
constexpr int kWsS = MLAV_WS_SSTAGES, kWsV = 6 - MLAV_WS_SSTAGES;
#elif !defined(MLAV_WS_STAGES)
// The S warps' ring is the critical path (v30 call 6: 3 + 3 936 us on tree32, 4 + 2 765); with
// P in the S ring's buffers the same bytes give it 6 (cuda/NOTES.md v30, call 11). The V ring
// has 8 KB (2 chunks of 64 keys or 4 of 32, MLAV_WS_VKEYS), and the chunks Q leaves to L1
// (MLAV_WS_QL1). MLAV_WS_VSTAGES=n (timing-only: past the budget unless Q gives the bytes) sets
// its depth in chunks.
#ifdef MLAV_WS_VSTAGES
constexpr int kWsS = 6, kWsV = MLAV_WS_VSTAGES;
#else
constexpr int kWsS = 6, kWsV = (2 + ws::kQL1) * ws::kVHalves;
#endif
#else
constexpr int kWsS = MLAV_WS_STAGES, kWsV = MLAV_WS_STAGES;
#endif
constexpr int kWsSmem = ws::Layout<kWsS, kWsV>::kBytes;
constexpr auto kWsKernel = verify_partial_ws<kWsS, kWsV>;
#if !defined(MLAV_WS_STAGES) && !defined(MLAV_WS_VSTAGES)
static_assert(kWsSmem <= sm120_smem_bytes(kMma2RingWs), "verify_kernel.h's byte count");
static_assert(kWsSmem <= kSm120SmemLimit, "sm_120 budget");
static_assert(ws::kQL1 != 0 ||
                  ws::v_ring<kWsV>() == (ws::kVKeys == 64 ? ws_ring::kVRing64 : ws_ring::kVRing),
              "the V ring tests/cuda/test_ws_ring.cpp runs");
#endif
}  // namespace

#ifdef MLAV_WS_TRACE
// Prints the last traced launch (cycles per tile, averaged over blocks with at least 4 tiles)
// and clears the record.
static void dump_ws_trace() {
  static unsigned long long tr[kWsTraceBlocks][8];
  if (cudaDeviceSynchronize() != cudaSuccess) return;
  CUDA_CHECK(cudaMemcpyFromSymbol(tr, g_ws_trace, sizeof tr));
  double n = 0, f[8] = {};
  for (unsigned i = 0; i < kWsTraceBlocks; ++i) {
    if (tr[i][0] < 4) continue;
    n += 1;
    for (int k = 1; k < 8; ++k) f[k] += static_cast<double>(tr[i][k]) / tr[i][0];
  }
  if (n > 0)
    std::printf(
        "WSTRACE %.0f blocks, cycles per tile: S warps loop %.0f (chunk waits %.0f, "
        "softmax %.0f, P-empty wait %.0f); PV warps loop %.0f (chunk waits %.0f, P-full "
        "wait %.0f)\n",
        n, f[1] / n, f[2] / n, f[3] / n, f[4] / n, f[5] / n, f[6] / n, f[7] / n);
  static const unsigned long long zero[kWsTraceBlocks][8] = {};
  CUDA_CHECK(cudaMemcpyToSymbol(g_ws_trace, zero, sizeof zero));
}
#endif

void prepare_partial_ws(int carveout_percent) {
#ifdef MLAV_WS_TRACE
  static bool at_exit = false;
  if (!at_exit) at_exit = std::atexit(dump_ws_trace) == 0;
  dump_ws_trace();
#endif
  CUDA_CHECK(cudaFuncSetAttribute(kWsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmem));
  CUDA_CHECK(cudaFuncSetAttribute(kWsKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  carveout_percent));
}

int blocks_per_sm_ws() {
  CUDA_CHECK(cudaFuncSetAttribute(kWsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmem));
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kWsKernel, ws::kThreadsWs, kWsSmem));
  return n;
}

void launch_partial_ws(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  CUDA_CHECK(launch_partial_kernel(kWsKernel, args, grid, kWsSmem, stream, ws::kThreadsWs));
}

}  // namespace mlaverify::cuda::detail

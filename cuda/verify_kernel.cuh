// Device code of the verify kernel's split-KV partial kernel (tensor cores, cp.async pipeline),
// templated on the pipeline depth and instantiated in small .cu files; the merge is
// verify_merge.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "cuda/launch.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/types.h"
#include "mlaverify/verify_params.h"

namespace mlaverify::cuda::detail {

// ---------------------------------------------------------------------------------------------
// Geometry. A block owns 64 (node, head) rows of one request and one split (or the draft block).
// Key tiles are kKvTile = 64 tokens (the softmax rescale granularity of split_plan.h). A tile is
// streamed through shared memory in chunks of 64 tokens x kCols columns (64 as instantiated: 17
// chunks per tile, 9 for S = Q K^T over latent columns 0..511 then k_pe, 8 for O += P V; 128 is
// supported by the template: 4 + a half-width k_pe chunk, then 4). V (= latent columns) is re-read
// from L2: the Q tile (72 KB) and a whole KV tile (72 KB) do not both fit in sm_120's 99 KB.
// Warps: 8. For S they are 4 row groups (16 rows) x 2 halves of the tile's 64 keys. For PV they
// are 2 row pairs (32 rows, two m16 tiles) x 4 quarters of each chunk's columns, so each warp
// accumulates 32 rows x 128 columns (128 fp32 registers per thread), every warp works on every
// chunk, and each V fragment feeds 4 mma (V is read from smem twice per tile, not four times).
// P and the per-row softmax factors cross from the S layout to the PV layout through smem.
// ---------------------------------------------------------------------------------------------
constexpr int kRows = kRowsPerBlock;
constexpr int kThreads = kThreadsPerBlock;
static_assert(kKvTile == 64, "the chunk loader and warp layout assume 64-token tiles");
static_assert(kThreads == 256 && kRows == 64, "warp layout: 4 row groups x 2 halves");

constexpr int kQElems = kRows * kRowDim;  // [64, 576] bf16
constexpr int kPElems = kRows * kKvTile;  // [64, 64] bf16

// Chunk geometry for kCols columns per chunk (64 or 128).
template <int kCols>
struct Chunking {
  static_assert(kCols == 64 || kCols == 128, "16-byte units, swizzle groups of 8 units");
  static constexpr int kKChunks = kLatentDim / kCols + 1;  // latent chunks, then one for k_pe
  static constexpr int kVChunks = kLatentDim / kCols;
  static constexpr int kPerTile = kKChunks + kVChunks;  // 17 or 9
  static constexpr int kElems = kKvTile * kCols;        // [64, kCols] bf16
  static constexpr int kRowBytes = kCols * 2;
  static constexpr int kNTiles = kCols / 32;  // n8 tiles of a warp's quarter of a V chunk: 2 or 4
  static constexpr int kPairs = kNTiles / 2;  // ldmatrix.x4.trans loads two n8 tiles
  // Part kPart of a tile (0 .. kPerTile - 1): the k_pe chunk (64 columns, units 0..7 only), or
  // latent columns kPartOff .. kPartOff + kCols - 1 (K for parts before it, V after it).
  template <int kPart>
  static constexpr bool kRopePart = kPart == kKChunks - 1;
  template <int kPart>
  static constexpr int kPartOff = kPart < kKChunks - 1    ? kPart * kCols
                                  : kPart == kKChunks - 1 ? 0
                                                          : (kPart - kKChunks) * kCols;
};

// Calls f.template operator()<I>() for I = kBegin .. kEnd - 1, unrolled at compile time.
template <int kBegin, int kEnd, class F>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (kBegin < kEnd) {
    f.template operator()<kBegin>();
    static_for<kBegin + 1, kEnd>(f);
  }
}

// ---- small PTX wrappers ----------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16-byte async copy; src_bytes = 0 zero-fills the destination without reading the source.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
// The same through L1 (.ca: the source lines are looked up in, and allocated in, L1), for the
// L1-staged variant of the 2-stage kernel: its chunks were prefetched into L1 a few steps ahead.
__device__ __forceinline__ void cp_async16_ca(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
// Starts moving the line holding p into L1 (a hint: no register, nothing waits for it).
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                            uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1,
                                                  uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// mbarriers (the wgmma kernel's hand-overs; the TMA variant's landed chunks).
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
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
// MLAV_TMA_KV=1 (a variant of ring 4, cuda/NOTES.md v24, measured in v25): each KV chunk
// arrives as 64 TMA copies of one row x 64 columns (a tensor map per source, the 128-byte
// swizzle: on a 1024-byte-aligned buffer the layout swz() reads), issued by warp 0 and completed
// on the buffer's mbarrier by byte count, instead of 512 cp.async per chunk through the LSU.
#ifndef MLAV_TMA_KV
#define MLAV_TMA_KV 0
#endif
// Arrives on `bar` and adds `bytes` to the transactions its phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One box of the 2-D tensor map `map` (a global-memory CUtensorMap) at (x, y) into shared
// memory at `dst`, completing on `bar`; a box outside the map's extent is filled with zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int32_t x, int32_t y,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// `bytes` (a multiple of 16) from global `src` into shared memory at `dst`, completing on `bar`
// (cp.async.bulk: no tensor map, no swizzle).
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(dst), "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// D = A B + D, m16n8k16, bf16 operands, fp32 accumulators.
// MLAV_MMA_REPEAT=k (timing-only builds, cuda/NOTES.md v20c; never the kernel, whose results it
// breaks): each product is issued k times on the same accumulator, emulating tensor cores k
// times slower than the rest of the SM (the RTX PRO 6000's are ~2.4x slower per clock than the
// H200's). Without it the code is the plain product (the measured kernel's exact PTX).
#ifndef MLAV_MMA_REPEAT
#define MLAV_MMA_REPEAT 1
#endif
// MLAV_S_SPLIT=1 (a variant of ring 4, cuda/NOTES.md v24): in S each warp computes 32 rows x 32
// keys over half of every chunk's k16 steps (warps 0-3 steps 0-1, warps 4-7 steps 2-3), so a
// step reads 2 A and 2 B fragments for 8 mma (the kernel: 1 A and 2 B for 4 mma), a third fewer
// shared-memory reads in S; the two halves' partial scores meet through the k_pe chunk's buffer
// (16 rows x 32 keys fp32 per warp, in two rounds behind pair barriers) before the softmax, which
// then sees the kernel's layout. 16 more accumulator registers during S.
#ifndef MLAV_S_SPLIT
#define MLAV_S_SPLIT 0
#endif
// MLAV_KV_CA=1 (a variant of the mma.sync kernels, cuda/NOTES.md v27; the same bits): the chunk
// copies read through L1 (cp.async.ca) instead of bypassing it (.cg).
#ifndef MLAV_KV_CA
#define MLAV_KV_CA 0
#endif
// MLAV_KV_WHOLE_SECTORS=1 (a variant of the cp.async mma.sync kernels and of the ws kernel's S
// ring, cuda/NOTES.md v32; the same bits): each warp-wide chunk copy reads whole 32-byte sectors
// (see the chunk loader); 0 keeps the layout in which two copies share every sector.
#ifndef MLAV_KV_WHOLE_SECTORS
#define MLAV_KV_WHOLE_SECTORS 0
#endif
static_assert(MLAV_KV_WHOLE_SECTORS == 0 || MLAV_KV_WHOLE_SECTORS == 1,
              "MLAV_KV_WHOLE_SECTORS: 0 or 1");
// MLAV_NO_KV_LOAD=1 or 2 (timing-only variants, garbage results; see issue_part): no chunk
// copies, or no V chunk copies.
#ifndef MLAV_NO_KV_LOAD
#define MLAV_NO_KV_LOAD 0
#endif
// MLAV_COPY_LATE=k (1..4; a variant of the cp.async mma.sync kernels, cuda/NOTES.md v27; the
// same bits): a step issues its ahead chunk after k16 step k - 1 of its own compute instead of
// right after its barrier, so the step's first ldmatrix are not queued behind the copies.
#ifndef MLAV_COPY_LATE
#define MLAV_COPY_LATE 0
#endif
// MLAV_COPY_WARPS=1 (a variant of ring 4, cuda/NOTES.md v28; arch-specific targets only,
// sm_90a or sm_120a: setmaxnreg): four more warps (a third warpgroup, 384 threads) issue every
// KV chunk's cp.async and complete it on the buffer's "full" mbarrier; the 8 math warps wait on
// that barrier instead of a block barrier per step and hand the buffer back on its "empty"
// mbarrier. The copy warps give registers to the math warps (40 and 232 by default: 128 x 40 +
// 256 x 232 = 384 x 168, the entry budget of 384 threads). The same bits as the kernel.
// MLAV_COPY_WARPS=2: the same with every math thread arriving on "empty" (256 arrivals per use
// instead of lane 0 of each warp after __syncwarp), the form compute-sanitizer racecheck can
// follow (it does not order the other lanes' reads before lane 0's arrival: v19, v28).
#ifndef MLAV_COPY_WARPS
#define MLAV_COPY_WARPS 0
#endif
// MLAV_RING_EXTRA=k (k = 1 or 2; a timing-only variant of ring 4, cuda/NOTES.md v29: its results
// are garbage): ring 4's kernel with 4 + k chunk buffers in the same 100,864 bytes, the first k
// of them laid over Q's last 8 k rows (8 KB each), which the copies then overwrite while S reads
// them. It times a ring 1 or 2 chunks deeper than the sm_120 budget allows: whether the chunks
// in flight (24 KB in ring 4) are what paces the copies.
#ifndef MLAV_RING_EXTRA
#define MLAV_RING_EXTRA 0
#endif
static_assert(MLAV_RING_EXTRA >= 0 && MLAV_RING_EXTRA <= 2,
              "MLAV_RING_EXTRA: 0, 1 or 2 buffers over Q");
#if MLAV_COPY_WARPS && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL) && \
    !defined(__CUDA_ARCH_FEAT_SM120_ALL)
#error "MLAV_COPY_WARPS needs an arch-specific target (sm_90a or sm_120a) for setmaxnreg"
#endif
// The copy warps' registers (MLAV_COPY_REGS, a multiple of 8 from 24) and the math warps' (what
// is left of 384 x 168, rounded down to a multiple of 8: 240 for 24, 232 for 40).
#ifndef MLAV_COPY_REGS
#define MLAV_COPY_REGS 40  // v28: at 24 the copy warps spill on sm_90a and the variant is slower
#endif
constexpr int kCopyRegs = MLAV_COPY_REGS;
constexpr int kMathRegs = (384 * 168 - 128 * kCopyRegs) / 256 / 8 * 8;
static_assert(kCopyRegs >= 24 && kCopyRegs % 8 == 0 && kMathRegs <= 256, "setmaxnreg: 24 .. 256");
// Threads of a partial-kernel block: 256, or 384 for ring 4 with the copy warpgroup.
__host__ __device__ constexpr int partial_threads(int stages) {
  return MLAV_COPY_WARPS != 0 && stages == 4 ? kThreads + 128 : kThreads;
}
// Register reallocation of the executing warpgroup (every warp of it executes the same one).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if MLAV_COPY_WARPS
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if MLAV_COPY_WARPS
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// The executing thread's cp.async issued so far arrive on `bar` when they have landed (.noinc:
// the arrival is one of the count the barrier was initialised with).
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Barrier 5 over the 8 math warps (the copy warps never take part; the S split's pair barriers
// are 1 .. 4).
__device__ __forceinline__ void math_sync() {
  asm volatile("bar.sync 5, %0;\n" ::"n"(kThreads) : "memory");
}
// The softmax's 2^x (x <= 0). exp2f without fast-math keeps subnormal results: ptxas guards each
// MUFU.EX2 with a compare against -126 and two predicated multiplies (halve x, square the
// result). By default (MLAV_EX2_FTZ=1, cuda/NOTES.md v34-v36) this is ex2.approx.ftz alone, the
// same MUFU.EX2: the same bits for every x >= -126, and 0 instead of a subnormal below, i.e. for
// weights under 2^-126 of the row's running maximum (tests/cuda/gpu_bounds.h counts them). The
// ring kernels (2-4 stages), ws and, since v36, the wgmma kernel take it; MLAV_EX2_FTZ=0 restores
// exp2f in all of them. The 6-stage kernel keeps exp2f: with ex2.approx.ftz ptxas spills 8 bytes
// in its sm_90 object (the resource gate's no-spill rule).
#ifndef MLAV_EX2_FTZ
#define MLAV_EX2_FTZ 1
#endif
template <bool kFtz = MLAV_EX2_FTZ != 0>
__device__ __forceinline__ float softmax_exp2(float x) {
  if constexpr (kFtz) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
  } else {
    return exp2f(x);
  }
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  static_for<0, MLAV_MMA_REPEAT>([&]<int>() {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  });
}

// Shared-memory rows are 16-byte units; XOR-swizzling the unit within each group of 8 by the row's
// low 3 bits puts the 8 rows an ldmatrix reads in 8 different bank groups (rows are 128 or
// 1152 bytes long, both multiples of 128, so unswizzled they would all hit one bank group).
__device__ __forceinline__ int swz(int row, int unit) { return (unit & ~7) | ((unit ^ row) & 7); }

// ---- tree mask decoding (docs/spec.md §3); reads outside [0, mask_len) count as "not visible" --
// Graph-padded rows carry garbage mask bytes (docs/spec.md §3): bounds-checking every read keeps
// them from faulting, whatever the garbage says.
// One query row of the mask, decoded once: every format is either a byte per draft column
// (FullMask, QlenOnly: visible if nonzero) or a bit per column at bit index base + j of a byte
// array (FlashInfer packed; QlenOnlyBitpacking and DraftBits, whose little-endian words put bit
// j of a row at bit j % 8 of byte j / 8). A read is allowed in bytes [lo, hi) only, and columns
// j >= j_limit are invisible (a bitpacked word holds 8 * word bytes columns).
struct MaskRow {
  const uint8_t* bytes;
  int64_t base;    // byte index of column 0, or bit index when packed
  int64_t lo, hi;  // readable bytes
  int64_t j_limit;
  bool packed;

  __device__ __forceinline__ bool visible(int64_t j) const {
    if (j >= j_limit) return false;
    const int64_t b = base + j;
    const int64_t at = packed ? b >> 3 : b;
    if (at < lo || at >= hi) return false;
    return packed ? (bytes[at] >> (b & 7)) & 1 : bytes[at] != 0;
  }
  // Starts moving into L1 the bytes bits<kN, ..>(key0, ..) reads (at most two 128-byte lines),
  // so reads issued later, behind other traffic, find them there. A hint: nothing outside
  // [lo, hi) is touched, and nothing waits for it.
  template <int kN>
  __device__ __forceinline__ void prefetch(int64_t key0) const {
    int64_t first = packed ? (base + key0) >> 3 : base + key0;
    int64_t last = packed ? first + kN / 8 : first + kN - 1;
    first = first < lo ? lo : first;
    last = last >= hi ? hi - 1 : last;
    if (first > last) return;
    asm volatile("prefetch.global.L1 [%0];\n" ::"l"(bytes + first));
    if ((reinterpret_cast<uintptr_t>(bytes + first) >> 7) !=
        (reinterpret_cast<uintptr_t>(bytes + last) >> 7))
      asm volatile("prefetch.global.L1 [%0];\n" ::"l"(bytes + last));
  }
  // Bit k: column key0 + k is visible, for k < kN; columns at or past key_end are not. The
  // reads are independent and predicated (kUnroll in flight; fewer where registers are short):
  // kN bytes, or for packed rows the kN / 8 + 1 bytes that hold kN consecutive bits.
  template <int kN, int kUnroll>
  __device__ __forceinline__ uint64_t bits(int64_t key0, int64_t key_end) const {
    static_assert(kN % 8 == 0 && kN <= 32, "whole bytes, at most 32 columns");
    const int64_t end = key_end < j_limit ? key_end : j_limit;
    const int64_t n = end - key0;  // columns of the kN that exist
    uint64_t out = 0;
    if (packed) {
      const int64_t b0 = base + key0;
      const int64_t at0 = b0 >> 3;  // floor, also below zero
      uint64_t word = 0;
#pragma unroll
      for (int i = 0; i <= kN / 8; ++i) {
        const int64_t at = at0 + i;
        const uint64_t v = at >= lo && at < hi ? bytes[at] : 0;
        word |= v << (8 * i);
      }
      out = (word >> (b0 & 7)) & ((1ull << kN) - 1);
    } else {
#pragma unroll kUnroll
      for (int k = 0; k < kN; ++k) {
        const int64_t at = base + key0 + k;
        const bool on = k < n && at >= lo && at < hi && bytes[at] != 0;
        out |= static_cast<uint64_t>(on) << k;
      }
    }
    if (n < kN) out &= n <= 0 ? 0 : (1ull << n) - 1;
    return out;
  }
};

__device__ __forceinline__ MaskRow mask_row(const VerifyParams& p, int32_t req,
                                            const RequestExtent& e, int32_t t) {
  const int64_t P = e.prefix_len;
  const int64_t D = e.draft_nodes;
  MaskRow m{static_cast<const uint8_t*>(p.mask), 0, 0, p.mask_len, INT64_MAX, false};
  switch (p.mask_format) {
    case MaskFormat::FullMask:
      // Row stride P + D, draft column j at offset P (prefix columns are never read).
      m.base = p.mask_indptr[req] + t * (P + D) + P;
      break;
    case MaskFormat::QlenOnly: {
      const int64_t s = p.mask_draft_stride;
      m.base = static_cast<int64_t>(req) * s * s + t * s;
      break;
    }
    case MaskFormat::QlenOnlyBitpacking: {
      const int64_t wb = p.mask_word_bytes;
      const int64_t at = (static_cast<int64_t>(req) * p.mask_draft_stride + t) * wb;
      m.packed = true;
      m.base = at * 8;
      m.j_limit = wb * 8;
      if (at < 0 || at + wb > p.mask_len) m.hi = m.lo;  // the whole word must be in bounds
      break;
    }
    case MaskFormat::FlashInferPacked:
      m.packed = true;
      m.base = p.mask_indptr[req] * 8 + t * (P + D) + P;
      break;
    case MaskFormat::DraftBits:
      // mask_len counts uint32 words: word (q_begin + t) * stride + j / 32 in bounds.
      m.packed = true;
      m.base = (e.q_begin + t) * p.mask_draft_stride * 32;
      m.hi = p.mask_len * 4;
      break;
    default:
      m.hi = m.lo;  // unknown format: nothing visible (the host rejects it first)
  }
  return m;
}

// A row's softmax totals at the end of a partial (split_plan.h numerics 3): 1 / l (0 for a row
// that saw nothing) and lse = ln 2 * (m2 + log2 l), the natural log of the partial's normalizer
// from the log2-unit running max m2 (-inf for an empty row).
__device__ __forceinline__ float row_lse(float l, float m2, float& inv_l) {
  const bool empty = l == 0.f;
  inv_l = empty ? 0.f : 1.f / l;
  return empty ? -INFINITY : 0.6931471805599453f * (m2 + log2f(l));
}

// Row r's totals: 1 / l to row_inv_l, lse to the workspace.
__device__ __forceinline__ void store_row_totals(const PartialArgs& args, int64_t partial,
                                                 const RequestExtent& e, int64_t row0,
                                                 int64_t valid_rows, int r, float l, float m2,
                                                 float* row_inv_l) {
  const int32_t H = args.p.num_heads;
  const float lse = row_lse(l, m2, row_inv_l[r]);
  const int64_t row = row0 + r;
  if (row < valid_rows)
    args.ws_lse[partial * args.p.max_total_q * H + (e.q_begin + row / H) * H + row % H] = lse;
}

// The merge's arithmetic (split_plan.h numerics 4 and 5), one set of helpers for the merge
// kernel (verify_merge.cu merge_row) and the wgmma kernel's cluster merge, so both give the same
// bits: with M the largest partial lse of a row, o = sum over partials s in index order (the CPU
// backend's order) of w_s o_s, w_s = exp(lse_s - M), skipping lse_s = -inf (empty, unwritten or
// fully masked); then o / sum w_s, rounded once, and lse = M + log(sum w_s).
// Each o_s is normalized by its own sum; w_s restores its share of the global sum, which is what
// makes the merge exact. lse_s <= M, so w_s <= 1: no overflow.
__device__ __forceinline__ float merge_weight(float lse_s, float big_m) {
  return expf(lse_s - big_m);
}
__device__ __forceinline__ void merge_add(float4& o, float w, const float4& v) {
  o.x += w * v.x;
  o.y += w * v.y;
  o.z += w * v.z;
  o.w += w * v.w;
}
// o / sum w; wsum >= 1 (the partial at the max has w = 1).
template <int kC>
__device__ __forceinline__ void merge_normalize(float4 (&o)[kC], float wsum) {
  const float inv = 1.f / wsum;
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    o[c].x *= inv;
    o[c].y *= inv;
    o[c].z *= inv;
    o[c].w *= inv;
  }
}
// Columns col .. col + 3 of (token, head): bf16 rounded once to nearest even (stored as 8
// bytes), or fp32.
__device__ __forceinline__ void merge_store(const VerifyParams& p, int64_t token, int32_t head,
                                            int col, const float4& o) {
  const int64_t off = token * p.o_token_stride + head * p.o_head_stride + col;
  if (p.o_dtype == DType::BF16) {
    auto bits = [](float v) {
      return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
    };
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(p.o_lat) + off) =
        make_uint2(bits(o.x) | (bits(o.y) << 16), bits(o.z) | (bits(o.w) << 16));
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(p.o_lat) + off) = o;
  }
}
__device__ __forceinline__ void merge_store_lse(const VerifyParams& p, int64_t token,
                                                int32_t head, float big_m, float wsum) {
  p.lse[token * p.num_heads + head] = big_m == -INFINITY ? -INFINITY : big_m + logf(wsum);
}

// ---------------------------------------------------------------------------------------------
// The block's work (split_plan.h). Uniform plan (args.plan null): grid (row tile, request,
// split), split == num_splits the draft block. Balanced plan: grid.x is plan_max_units, block b
// takes unit b of the list the planning kernel wrote (launch_plan; the partial kernel is its
// programmatic dependent, so it waits here for the plan) or exits when b is past the count.
// The plan is read through L2 (__ldcg), never the read-only path: the kernel before wrote it.
// ---------------------------------------------------------------------------------------------
struct BlockUnit {
  int32_t req, row_tile, split;
  bool valid;
};
__device__ __forceinline__ BlockUnit block_unit(const PartialArgs& args) {
  if (args.plan == nullptr)
    return {static_cast<int32_t>(blockIdx.y), static_cast<int32_t>(blockIdx.x),
            static_cast<int32_t>(blockIdx.z), true};
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int32_t count = __ldcg(args.plan);
  // Within the buffer for every block of the grid (plan_max_units), so loaded beside the count.
  const uint2 u = __ldcg(reinterpret_cast<const uint2*>(args.plan +
                                                         plan_units_word(args.p.batch_size)) +
                         blockIdx.x);
  // Entries past the count are whatever the workspace held (the caller's buffer, last step's
  // plan): a block past it gets request 0, row tile 0, split 0, so code that reads the unit's
  // request before testing `valid` stays inside the metadata (the wgmma kernel read a stale
  // request's extent: found by the property suite, cuda/NOTES.md v22).
  const bool valid = static_cast<int32_t>(blockIdx.x) < count;
  return {valid ? static_cast<int32_t>(u.x) : 0, valid ? static_cast<int32_t>(u.y & 0xffffu) : 0,
          valid ? static_cast<int32_t>(u.y >> 16) : 0, valid};
}
// The block's unit once more, where it is needed again after the main loop has started: in the
// uniform plan the block index (a special register, re-read for free); in the balanced plan a
// load the compiler may not keep in a register across the loop (asm volatile), so the unit costs
// the 255-register kernels no live registers (keeping it live spilled the L1-staged ring).
__device__ __forceinline__ BlockUnit unit_again(const PartialArgs& args) {
  if (args.plan == nullptr)
    return {static_cast<int32_t>(blockIdx.y), static_cast<int32_t>(blockIdx.x),
            static_cast<int32_t>(blockIdx.z), true};
  const uint32_t* at = reinterpret_cast<const uint32_t*>(args.plan + plan_units_word(args.p.batch_size)) + 2 * blockIdx.x;
  uint32_t x, y;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "l"(at));
  return {static_cast<int32_t>(x), static_cast<int32_t>(y & 0xffffu), static_cast<int32_t>(y >> 16),
          true};
}
// Splits of request `req` (non-empty, filled from the front): n_i of the balanced plan, or
// num_splits under the uniform plan (whose range functions take num_splits).
__device__ __forceinline__ int32_t plan_splits(const PartialArgs& args, int32_t req) {
  return args.plan != nullptr ? __ldcg(args.plan + 2 + req) : args.p.num_splits;
}

// Enqueues kernel(args) on `stream` with cudaLaunchKernelEx (the call returns this launch's own
// error, where cudaGetLastError() after `<<<>>>` may also return an earlier call's: cuda/NOTES.md
// v23), as a programmatic dependent of the stream's previous kernel when `dependent` (sm_90 and
// later; captured into graphs as a programmatic edge): its blocks may start before that kernel
// ends and must wait in griddepcontrol.wait before reading what it writes.
template <class Args>
cudaError_t launch_kernel(void (*kernel)(const Args), const Args& args, dim3 grid, int threads,
                          int smem, cudaStream_t stream, bool dependent) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attr;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args);
}

// Enqueues a partial kernel: the uniform plan's grid `uniform_grid`, or, under the balanced plan,
// plan_max_units blocks along x, launched as a programmatic dependent of the planning kernel when
// args.plan_pdl (its blocks start while the plan is written and wait for it in block_unit). Args
// is PartialArgs or a variant's type derived from it (the TMA loader's TmaArgs).
template <class Args>
cudaError_t launch_partial_kernel(void (*kernel)(const Args), const Args& args, dim3 uniform_grid,
                                  int smem, cudaStream_t stream, int threads = kThreads) {
  const bool balanced = args.plan != nullptr;
  const dim3 grid =
      balanced ? dim3(static_cast<unsigned>(plan_max_units(args.p))) : uniform_grid;
  return launch_kernel(kernel, args, grid, threads, smem, stream, balanced && args.plan_pdl);
}

#ifdef MLAV_MMA_TRACE
// Timing-only builds of the mma.sync kernels (never the kernel; without the flag nothing below
// or in the kernel changes): thread 0 of every block adds up clock64() cycles per phase over its
// tiles (S steps, softmax, PV steps), its prologue and epilogue, and the chunk steps' waits;
// every launch overwrites. verify_partial_s2.cu prints a summary at the next prepare and at exit.
//   UNIT=verify_partial_s2 scripts/variant_bench.sh mmatrace cuda/verify_partial_s2.cu \
//     -DMLAV_MMA_TRACE
enum MmaTraceField { kMtTiles, kMtPro, kMtS, kMtSoftmax, kMtPv, kMtEpi, kMtSm, kMtWait, kMtFields };
constexpr unsigned kMmaTraceBlocks = 4096;
static __device__ unsigned long long g_mma_trace[kMmaTraceBlocks][kMtFields];
static __device__ unsigned g_mma_trace_grid[3];
#define MLAV_MT(...) __VA_ARGS__
#else
#define MLAV_MT(...)
#endif

// ---------------------------------------------------------------------------------------------
// Partial kernel. grid = (row tiles, batch_size, num_splits + 1); z == num_splits is the draft.
// ---------------------------------------------------------------------------------------------
// kL1Ahead > 0 (the L1-staged variant, cuda/NOTES.md v16): every chunk is also prefetched into
// L1 kL1Ahead chunks before its cp.async is issued, and the cp.async reads through L1 (.ca), so
// a 2-buffer shared-memory ring waits on L1 hits instead of L2 round trips: L1 acts as a ring of
// kL1Ahead more chunks (8 KB each) that costs no shared memory. kL1Ahead = 0 is the v6 kernel.
// kPInRing (v16b): P has no buffer of its own; it lives in the ring buffer that held the tile's
// k_pe chunk, from the end of that chunk's S step (after the softmax's first barrier) to the
// barrier of the first V step (the pa fragments are in registers by then), which is when the
// ring reuses that buffer (kStages == 3: chunk g + 3 goes where chunk g was). So 3 buffers cost
// the bytes of 2 buffers and P.
// kStages == 4 with kPInRing (v16d): Q's k_pe columns are not staged in shared memory (the tile
// holds Q's 512 latent columns, 64 KB); each warp loads its k_pe A fragments from global memory
// (L1-resident after the first tile: 8 KB per block) at the start of every tile, 16 32-bit
// loads per lane, and the 8 KB go to a fourth ring buffer. Row offsets: a 64-entry table.
// Args: PartialArgs, or a type derived from it that adds the kernel's own parameters (the
// MLAV_TMA_KV variant's tensor maps, verify_partial_s2.cu); __grid_constant__, so that their
// addresses are parameter space.
template <int kStages, int kCols, int kL1Ahead = 0, bool kPInRing = false,
          class Args = PartialArgs>
__global__ void __launch_bounds__(partial_threads(kStages), 1)
    verify_partial(const __grid_constant__ Args kargs) {
  const PartialArgs& args = kargs;
  static_assert(kStages >= 2, "double buffering at least");
  static_assert(!kPInRing || (kStages >= 3 && kStages <= 4 + MLAV_RING_EXTRA && kCols == 64),
                "P in the ring: a 64 x 64 bf16 chunk buffer, free from the k_pe step to V step 0");
  constexpr bool kQRopeGlobal = kPInRing && kStages >= 4;
  // The softmax's 2^x: ex2.approx.ftz (MLAV_EX2_FTZ) but in the 6-stage kernel (softmax_exp2).
  constexpr bool kFtz = MLAV_EX2_FTZ != 0 && kStages != 6;
  // MLAV_RING_EXTRA: the ring's first kRingAlias buffers lie over Q's last rows (timing only).
  constexpr int kRingAlias = kQRopeGlobal ? kStages - 4 : 0;
  constexpr int kQRow = kQRopeGlobal ? kLatentDim : kRowDim;  // Q elements per smem row
  constexpr int kQUnits = kQRow / 8;
  static_assert(kL1Ahead >= 0 && kL1Ahead < Chunking<kCols>::kPerTile, "prefetch at most one tile ahead");
  using CK = Chunking<kCols>;
  constexpr int kKChunks = CK::kKChunks;
  constexpr int kVChunks = CK::kVChunks;
  constexpr int kChunksPerTile = CK::kPerTile;
  constexpr int kChunkElems = CK::kElems;
  constexpr int kRowBytes = CK::kRowBytes;
  constexpr int kNT = CK::kNTiles;
  const VerifyParams& p = args.p;
  // Split outermost: blocks are scheduled x, then y, then z, so every request's prefix blocks go
  // first and the short draft blocks (z == num_splits) fill the tail as prefix blocks finish.
  // Balanced plan: the block's unit from the planning kernel's list (block_unit).
  const BlockUnit unit = block_unit(args);
  if (!unit.valid) return;
  const int32_t req = unit.req;
  const int32_t split = unit.split;
  const bool is_draft = split == p.num_splits;
  const RequestExtent e = request_extent(p, req);
  const int32_t H = p.num_heads;
  const int64_t valid_rows = static_cast<int64_t>(e.draft_nodes) * H;
  int64_t row0 = static_cast<int64_t>(unit.row_tile) * kRows;  // re-read after the loop
  if (row0 >= valid_rows) return;  // static grid sized from max_draft: no work for this tile

  int64_t key_begin = 0, key_end = e.draft_nodes;
  if (!is_draft) {
    SplitRange r = split_range(e.prefix_len, plan_splits(args, req), split);
    if (r.empty()) return;  // the merge skips empty splits by the same split_range
    key_begin = r.begin;
    key_end = r.end;
  }
  const int num_tiles = static_cast<int>((key_end - key_begin + kKvTile - 1) / kKvTile);
  // (mt_w: the chunk steps' waits, inside S and PV: from a step's start to its chunk being
  // there, the block barrier included where there is one; 32-bit clock() differences, one
  // register: a 64-bit sum spilled the trace builds; v28)
  MLAV_MT(const unsigned long long mt_t0 = clock64(); unsigned long long mt_s = 0, mt_sm = 0,
          mt_pv = 0, mt_a = 0; unsigned mt_w = 0;)

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [64, kQRow]
  __nv_bfloat16* p_s = q_s + kRows * kQRow;  // [64, 64], unless kPInRing
  __nv_bfloat16* kv_s =
      kPInRing ? p_s - kRingAlias * kChunkElems : p_s + kPElems;  // [kStages, 64, kCols]
  float* red_max = reinterpret_cast<float*>(kv_s + kStages * kChunkElems);  // [2, 64]
  float* red_sum = red_max + 2 * kRows;                                     // [2, 64]
  float* row_scale = red_sum + 2 * kRows;                                   // [64]
  float* row_inv_l = row_scale + kRows;                                     // [64]
  uint64_t* vis_s = reinterpret_cast<uint64_t*>(row_inv_l + kRows);         // [64]
  // kQRopeGlobal: each row's k_pe in p.q; rows past the request point at the tile's first row
  // (their scores are never stored, and a row's scores depend on its own Q row only).
  const __nv_bfloat16** qrope_row = reinterpret_cast<const __nv_bfloat16**>(vis_s + kRows);  // [64]
  // kTma (MLAV_TMA_KV, the variant's own kernel, whose Args carry the maps): a "chunk landed"
  // mbarrier per ring buffer, after the row table.
  constexpr bool kTma = MLAV_TMA_KV != 0 && kStages >= 4 && !std::is_same_v<Args, PartialArgs>;
  uint64_t* full_bar = reinterpret_cast<uint64_t*>(qrope_row + kRows);  // [kStages]
  // kCopyWarps (MLAV_COPY_WARPS): threads kThreads .. + 127 copy, the first kThreads compute.
  // full_bar[b]: buffer b's chunk landed (128 arrivals, one per copy thread, each when its own
  // cp.async have landed); empty_bar[b]: the 8 math warps are done with it (one arrival per warp,
  // or per thread under MLAV_COPY_WARPS=2).
  constexpr bool kCopyWarps = partial_threads(kStages) != kThreads;
  static_assert(!kCopyWarps || (!kTma && MLAV_COPY_LATE == 0 && kL1Ahead == 0),
                "MLAV_COPY_WARPS: the cp.async ring of 4, without late copies");
  uint64_t* empty_bar = full_bar + kStages;  // [kStages], kCopyWarps

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // kSplitS (MLAV_S_SPLIT): warp w computes S for rows rq * 32 .. + 31 and keys kq * 32 .. + 31
  // over k16 steps set * 2 and + 1 of each chunk; after the exchange it holds rows rq * 32 +
  // set * 16 .. + 15, which is row group rg = 2 rq + set, half kq, as in the kernel's layout.
  constexpr bool kSplitS = MLAV_S_SPLIT != 0 && kStages == 4;
  const int s_set = warp >> 2, s_rq = (warp & 3) >> 1;
  const int rg = kSplitS ? 2 * s_rq + s_set : warp >> 1;  // row group: rows rg*16 .. rg*16+15
  const int half = warp & 1;  // the key half (kq, under kSplitS)
  static_assert(!kSplitS || kCols == 64, "the S split takes 2 of a chunk's 4 k16 steps");
  const int rp = warp >> 2;      // PV row pair: rows rp*32 .. rp*32+31
  const int quarter = warp & 3;  // PV column quarter of every chunk

  if constexpr (kTma) {
    // The swizzle TMA writes is swz()'s only on 1024-byte-aligned chunk buffers.
    if (tid == 0) {
      if ((smem_addr(kv_s) & 1023u) != 0) __trap();
      for (int b = 0; b < kStages; ++b) mbar_init(smem_addr(full_bar + b), 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Published by the barrier after the row table below, before the first chunk is issued.
  }
  if constexpr (kCopyWarps) {
    if (tid == 0) {
      for (int b = 0; b < kStages; ++b) {
        mbar_init(smem_addr(full_bar + b), 128);
        mbar_init(smem_addr(empty_bar + b), MLAV_COPY_WARPS == 2 ? kThreads : kThreads / 32);
      }
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Published by the barrier after the row table below (every thread of the block).
  }
  // ---- Q tile: 64 rows x 72 units of 16 bytes, rows past the request zero-filled ----
  {
    const __nv_bfloat16* qbase = static_cast<const __nv_bfloat16*>(p.q);
    // (kCopyWarps: the math threads load Q and wait for it themselves, before their loop.)
    for (int u = tid; u < kRows * kQUnits && (!kCopyWarps || tid < kThreads); u += kThreads) {
      int r = u / kQUnits, unit = u % kQUnits;
      int64_t row = row0 + r;
      bool ok = row < valid_rows;
      int64_t t = ok ? row / H : 0, h = ok ? row % H : 0;
      int64_t col = unit < 64 ? p.q_latent_offset + unit * 8 : p.q_rope_offset + (unit - 64) * 8;
      const __nv_bfloat16* src =
          qbase + (e.q_begin + t) * p.q_token_stride + h * p.q_head_stride + col;
      cp_async16(smem_addr(q_s + r * kQRow + swz(r, unit) * 8), ok ? src : qbase, ok ? 16 : 0);
    }
    if constexpr (kQRopeGlobal) {
      // Read at the start of every tile, before that tile's first chunk barrier: published
      // here (the first run of v16d read it unsynchronized in tile 0; racecheck caught it).
      if (tid < kRows) {
        const int64_t row = row0 + tid < valid_rows ? row0 + tid : row0;
        qrope_row[tid] = qbase + (e.q_begin + row / H) * p.q_token_stride +
                         (row % H) * p.q_head_stride + p.q_rope_offset;
      }
      __syncthreads();
    }
    cp_async_commit();
  }

  // ---- chunk loader: thread owns key tid / 4 and the 16-byte units (tid % 4) * 2 and + 1 ----
  // (with 128 columns also + 8 and + 9). One key per thread keeps its row pointers in few
  // registers. kWholeSectors (MLAV_KV_WHOLE_SECTORS=1, cuda/NOTES.md v32): units tid % 4 and + 4
  // (+ 8, + 12) instead, so that each warp-wide cp.async reads whole 32-byte sectors (a key's 4
  // threads: 64 contiguous bytes). With units 2t and 2t + 1 one cp.async takes the first half of
  // each of a row's four sectors and the next one the second half: every sector requested twice.
  // The chunk steps of a tile are unrolled at compile time (static_for below), so which part of
  // the row a chunk holds, when the loader crosses into the next tile and every shared-memory
  // offset are constants: per chunk the loader does adds and cp.async, no branches.
  // kCopyWarps: copy thread c = tid - kThreads owns key c / 2 and units (c % 2) * 4 .. + 3.
  const __nv_bfloat16* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  const int ld_key = kCopyWarps ? (tid - kThreads) >> 1 : tid >> 2;
  constexpr bool kWholeSectors =
      MLAV_KV_WHOLE_SECTORS != 0 && !kCopyWarps && !kTma && kL1Ahead == 0;
  const int ld_unit = kCopyWarps      ? ((tid - kThreads) & 1) * 4
                      : kWholeSectors ? tid & 3
                                      : (tid & 3) * 2;
  const bool slots_from_indices = !(is_draft && p.draft_source == DraftKvSource::ExtendRows);
  const int64_t index_base = e.kv_begin + (is_draft ? e.prefix_len : 0);
  // Slot ids one tile ahead, so the dependent index load is in flight while a tile streams.
  // (key k of the tile; the cp.async loader's is ld_key, the TMA loader's lane and lane + 32)
  auto slot_of = [&](int tile, int k) -> int64_t {
    const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + k;
    return (tile < num_tiles && key < key_end) ? p.kv_indices[index_base + key] : 0;
  };
  auto load_slot = [&](int tile) { return slot_of(tile, ld_key); };
  // (kCopyWarps: loaded in the copy warps' loop; a math thread's ld_key is not a key.)
  int64_t next_slot = slots_from_indices && !kCopyWarps ? load_slot(0) : 0;
  const __nv_bfloat16* lat_src = pool;   // this thread's first unit of c
  const __nv_bfloat16* rope_src = pool;  // and of k_pe
  int src_bytes = 0;                     // 16, or 0: zero-fill past key_end
  // This thread's first latent (rope: second) unit of key ld_key of `tile`, whose slot id is
  // `slot` (unused for ExtendRows draft keys); the pool's first element outside the split.
  auto key_src = [&](int tile, int64_t slot, bool rope, bool& ok) -> const __nv_bfloat16* {
    const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + ld_key;
    ok = tile < num_tiles && key < key_end;
    if (!ok) return pool;  // never read (src-size 0), but a valid address
    if (!slots_from_indices) {
      const __nv_bfloat16* row =
          static_cast<const __nv_bfloat16*>(p.k_extend) + (e.q_begin + key) * p.k_extend_stride;
      return row + (rope ? kLatentDim : 0) + ld_unit * 8;  // k_extend rows are latent-first
    }
    // Prefix keys are the first P_i entries; CacheSlots draft keys follow them.
    return pool + (rope ? p.kv_layout.rope_index(slot) : p.kv_layout.latent_index(slot)) +
           ld_unit * 8;
  };
  // kTma: warp 0's lane owns keys lane and lane + 32 of the loader tile (MLAV_TMA_KV=2: lanes
  // 0-7 of every warp, key warp * 8 + lane): their rows in the tensor map (slot ids, or
  // k_extend rows), -1 (outside the map: zero-filled) past the split.
  // (Slot ids fit 31 bits: the launcher checks pool_slots.)
  // MLAV_TMA_KV=3 (timing-only: cuda/NOTES.md v25, its results are garbage): as 2, but each row
  // arrives by a plain bulk copy (cp.async.bulk, no tensor map, no swizzle: the units of a row
  // land unpermuted, which the reads do not expect), to time bulk copies against tensor copies.
  // MLAV_TMA_KV=4 and 5 (timing-only, garbage results): as 3 with a half (a quarter) of the
  // requests, each of 256 (512) bytes from one key's row, issued by lanes 0-3 (0-1) of every
  // warp: whether a request's cost is per request or per byte.
  // MLAV_TMA_KV=6 (timing-only, cuda/NOTES.md v29; correct only where every tile's 64 slots are
  // one ascending run, as in a pool paged by 64 with MLAV_BENCH_RUN_LEN=64, and past key_end it
  // reads the run's next rows instead of zeros): thread 0 issues each chunk as one box of 64 rows
  // x 64 columns at the slot of the tile's first key (the maps' box is 64 rows), 17 requests per
  // tile instead of 1,088: what the copy engine costs per byte once requests are few.
  constexpr bool kBox = MLAV_TMA_KV == 6;
  constexpr bool kBulk = MLAV_TMA_KV >= 3 && !kBox;
  constexpr int kBulkRows = MLAV_TMA_KV == 4 ? 2 : MLAV_TMA_KV == 5 ? 4 : 1;  // rows per request
  constexpr bool kTmaSpread = MLAV_TMA_KV >= 2 && !kBox;
  constexpr int kTmaKeys = kTmaSpread || kBox ? 1 : 2;  // keys per issuing lane
  // (Captureless: a lambda that captured lane and warp changed the default kernel's code.)
  auto tma_issuer = [](int w, int l) {
    return kBox ? w == 0 && l == 0 : kTmaSpread ? l < 8 / kBulkRows : w == 0;
  };
  auto tma_key = [](int w, int l, int j) {
    return kBox ? 0 : kTmaSpread ? w * 8 + kBulkRows * l : l + 32 * j;
  };
  int32_t tma_y[2] = {-1, -1};
  int32_t tma_next[2] = {0, 0};
  const __nv_bfloat16* bulk_lat[2] = {};  // kBulk: the rows' latent and k_pe starts
  const __nv_bfloat16* bulk_rope[2] = {};
  auto tma_slot = [&](int tile, int k) { return static_cast<int32_t>(slot_of(tile, k)); };
  if constexpr (kTma) {
    if (tma_issuer(warp, lane) && slots_from_indices)
      for (int j = 0; j < kTmaKeys; ++j) tma_next[j] = tma_slot(0, tma_key(warp, lane, j));
  }
  auto loader_enter_tile = [&](int tile) {
    if constexpr (kTma) {
      if (tma_issuer(warp, lane)) {
        for (int j = 0; j < kTmaKeys; ++j) {
          const int64_t key = key_begin + static_cast<int64_t>(tile) * kKvTile + tma_key(warp, lane, j);
          const bool ok = tile < num_tiles && key < key_end;
          tma_y[j] = !ok ? -1
                     : slots_from_indices ? tma_next[j]
                                          : static_cast<int32_t>(e.q_begin + key);
          if constexpr (kBulk) {
            if (!ok) {
              bulk_lat[j] = bulk_rope[j] = pool;
            } else if (!slots_from_indices) {
              bulk_lat[j] = static_cast<const __nv_bfloat16*>(p.k_extend) +
                            (e.q_begin + key) * p.k_extend_stride;
              bulk_rope[j] = bulk_lat[j] + kLatentDim;
            } else {
              bulk_lat[j] = pool + p.kv_layout.latent_index(tma_next[j]);
              bulk_rope[j] = pool + p.kv_layout.rope_index(tma_next[j]);
            }
          }
          if (slots_from_indices) tma_next[j] = tma_slot(tile + 1, tma_key(warp, lane, j));
        }
      }
      return;
    }
    bool ok;
    lat_src = key_src(tile, next_slot, false, ok);
    rope_src = key_src(tile, next_slot, true, ok);
    src_bytes = ok ? 16 : 0;
    if (slots_from_indices) next_slot = load_slot(tile + 1);
  };
  const uint32_t kv_base = smem_addr(kv_s);
  // Destination of this thread's first unit in a chunk buffer (swizzled by key & 7). Its second
  // unit ld_unit + 1 lands at physical unit (ld_unit ^ k7) ^ 1 (ld_unit is even): byte ^ 16.
  // With 128 columns units + 8 and + 9 sit 128 bytes further (the swizzle keeps the group of 8).
  // kWholeSectors: the second unit is ld_unit + 4 (ld_unit < 4), physical (ld_unit ^ k7) ^ 4.
  const uint32_t ld_dst0 = ld_key * kRowBytes + (ld_unit ^ (ld_key & 7)) * 16;
  const uint32_t ld_dst1 = ld_dst0 ^ (kWholeSectors ? 64 : 16);
  constexpr int kSecondUnit = kWholeSectors ? 32 : 8;  // elements from the first unit
  // Issues the chunk holding part `kPart` of the current loader tile into buffer `buf`.
  auto issue_part = [&]<int kPart>(uint32_t buf) {
    constexpr bool rope = CK::template kRopePart<kPart>;
    constexpr int off = CK::template kPartOff<kPart>;
    if constexpr (kTma) {
      // Maps: the pool's latent view, its k_pe view, k_extend's rows (latent-first, 576 wide).
      if (tma_issuer(warp, lane)) {
        const char* maps = reinterpret_cast<const char*>(kargs.maps);
        const void* map = !slots_from_indices ? maps + 256 : rope ? maps + 128 : maps;
        const int32_t x = !slots_from_indices && rope ? kLatentDim : rope ? 0 : off;
        const uint32_t bar = smem_addr(full_bar) + ((buf - kv_base) / (kChunkElems * 2)) * 8;
        // One arrival (the barrier's count) with the chunk's bytes; copies of other warps that
        // land before it leave the phase incomplete (its arrival is pending).
        if (tid == 0) mbar_arrive_expect_tx(bar, kChunkElems * 2);
#pragma unroll
        for (int j = 0; j < kTmaKeys; ++j) {
          if constexpr (kBulkRows > 1)  // stays inside the key's row
            bulk_load(buf + tma_key(warp, lane, j) * kRowBytes, bulk_lat[j] + (off & 255),
                      kBulkRows * kRowBytes, bar);
          else if constexpr (kBulk)
            bulk_load(buf + tma_key(warp, lane, j) * kRowBytes, rope ? bulk_rope[j] : bulk_lat[j] + off,
                      kRowBytes, bar);
          else
            tma_load_2d(buf + tma_key(warp, lane, j) * kRowBytes, map, x, tma_y[j], bar);
        }
      }
      return;
    }
    const __nv_bfloat16* src = (rope ? rope_src : lat_src) + off;
    auto copy = [&](uint32_t dst, const __nv_bfloat16* from) {
      // MLAV_KV_CA: a V chunk can hit the lines its K chunk allocated a few steps before.
      if constexpr (kL1Ahead > 0 || MLAV_KV_CA != 0)
        cp_async16_ca(dst, from, src_bytes);
      else
        cp_async16(dst, from, src_bytes);
    };
    // Timing-only (garbage results): MLAV_NO_KV_LOAD=1 issues none of the chunk's copies, so each
    // step's wait and barrier find nothing in flight (cuda/NOTES.md v24: the loop without the KV
    // stream from L2); =2 copies the K and k_pe chunks but not the V ones (v27: what reading V
    // from the K chunks, KV from L2 once per tile, could save).
    if constexpr (MLAV_NO_KV_LOAD == 1 || (MLAV_NO_KV_LOAD == 2 && kPart >= kKChunks))
      if (src_bytes >= 0) return;
    if constexpr (kCopyWarps) {
      // Units ld_unit + j (ld_unit is 0 or 4, j < 4) land at physical (ld_unit ^ k7) ^ j.
#pragma unroll
      for (int j = 0; j < 4; ++j) copy(buf + (ld_dst0 ^ (j * 16)), src + j * 8);
      return;
    }
    copy(buf + ld_dst0, src);
    copy(buf + ld_dst1, src + kSecondUnit);
    if constexpr (kCols == 128 && !rope) {
      copy(buf + ld_dst0 + 128, src + 64);
      copy(buf + ld_dst1 + 128, src + 64 + kSecondUnit);
    }
  };

  // ---- kCopyWarps: the copy warpgroup streams every chunk of the block's tiles, in order ----
  // Chunk g goes to buffer g % kStages once the math warps have released that buffer's previous
  // chunk (g - kStages); a fresh barrier passes a wait for parity 1, so the first kStages go at
  // once. The copy warps issue exactly the chunks the math warps consume, wait for their own
  // copies to land and leave.
  if constexpr (kCopyWarps) {
    if (tid >= kThreads) {
      setmaxnreg_dec<kCopyRegs>();
      if (slots_from_indices) next_slot = load_slot(0);
      const uint32_t full0 = smem_addr(full_bar), empty0 = smem_addr(empty_bar);
      uint32_t empty_parity = (1u << kStages) - 1;
      int wb = 0;
#pragma unroll 1
      for (int tile = 0; tile < num_tiles; ++tile) {
        loader_enter_tile(tile);
        static_for<0, kChunksPerTile>([&]<int kPart>() {
          mbar_wait(empty0 + wb * 8, (empty_parity >> wb) & 1u);
          empty_parity ^= 1u << wb;
          issue_part.template operator()<kPart>(kv_base + wb * kChunkElems * 2);
          cp_async_arrive_noinc(full0 + wb * 8);
          wb = wb + 1 == kStages ? 0 : wb + 1;
        });
      }
      cp_async_wait<0>();
      return;
    }
    setmaxnreg_inc<kMathRegs>();
  }

  // ---- per-row softmax state: this thread holds rows lane/4 and lane/4 + 8 of its row group ----
  // m_run starts at -FLT_MAX, not -inf: a row with nothing visible yet then has a finite
  // running max, so exp2f(t - m) needs no guard (t = -inf gives exactly 0, never -inf - -inf)
  // and neither does the rescale (2^0 = 1 on the empty state). The first visible score t
  // (> -FLT_MAX) replaces it, and 2^(-FLT_MAX - t) = 0 as 2^(-inf) was: the same bits. A row
  // that never saw a key keeps l = 0, which row_lse reports as empty whatever m is.
  float m_run[2] = {-FLT_MAX, -FLT_MAX};
  float l_run[2] = {0.f, 0.f};
  // [V chunk][m16 tile][n8 tile][fragment]: 32 rows x 128 columns per warp
  float acc[kVChunks][2][kNT][4];
#pragma unroll
  for (int c = 0; c < kVChunks; ++c)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int f = 0; f < 4; ++f) acc[c][mt][n][f] = 0.f;

  const int frag_row = lane >> 2;           // C fragment row within the 16-row group (and +8)
  const int frag_col = (lane & 3) * 2;      // C fragment column pair within an n8 tile
  const int mi = lane >> 3, mr = lane & 7;  // ldmatrix: which 8x8 matrix, which of its rows
  const int a_row = rg * 16 + (lane & 15);  // A operand row this lane addresses (a_row & 7 == mr)
  // Per-lane ldmatrix byte offsets; the swizzle of a compile-time unit needs only unit ^ (row & 7).
  // k16 step ks reads units ks * 2 + {0, 1}: group ks / 4 (128 bytes each), (ks % 4) within it.
  // Unit ks * 2 + b (b a lane bit, ks * 2 even) swizzles to (ks * 2) ^ (b ^ mr): one XOR with a
  // compile-time constant per use, so no per-ks offsets occupy registers.
  const uint32_t xa0 = ((lane >> 4) ^ mr) * 16;            // A operands (Q, P): b = lane / 16
  const uint32_t xb0 = (((mi & 1)) ^ mr) * 16;             // K fragments: b = matrix index & 1
  const int v_unit0 = quarter * (kCols / 32) + (mi >> 1);  // V columns of this warp's quarter
  // V unit v_unit0 + pair * 2: the group of 8 stays, the low 3 bits XOR with mr.
  const uint32_t xv0 = ((v_unit0 & ~7) * 16) | (((v_unit0 & 7) ^ mr) * 16);
  const uint32_t q_lane = smem_addr(q_s) + a_row * kQRow * 2;
  // kSplitS: m16 tile 0 is the warp's own rows (rg's), tile 1 its partner's (the other 16 of
  // rq's 32); the k16 steps set * 2 + kk, whose swizzle bits are set * 64 ^ kk * 32.
  const uint32_t q_lane_other =
      smem_addr(q_s) + ((s_rq * 32 + (1 - s_set) * 16) + (lane & 15)) * kQRow * 2;
  const uint32_t xa_set = xa0 ^ (s_set * 64), xb_set = xb0 ^ (s_set * 64);
  // PV layout: row pair rp (rows rp * 32 + mt * 16 + ...), column quarter `quarter`.
  const uint32_t p_lane_off = (rp * 32 + (lane & 15)) * kKvTile * 2;
  // Shared address of this tile's P (set at the k_pe step when P lives in the ring).
  uint32_t p_buf = smem_addr(p_s);
  const uint32_t smem_base = smem_addr(smem_raw);
  const uint32_t kb_lane = (half * 32 + (mi >> 1) * 8 + mr) * kRowBytes;  // K chunk rows (keys)
  const uint32_t vb_lane = ((mi & 1) * 8 + mr) * kRowBytes;               // V chunk rows (keys)

  // sm_scale * log2(e), rounded once to fp32: scores in log2 units (see the softmax below).
  const float scale_log2 = p.sm_scale * 1.4426950408889634f;

  // Ring of kStages chunk buffers: chunk g lives in buffer g % kStages. rd is the buffer computed
  // now; the one issued now is rd - 1 (mod kStages), freed by the previous step.
  int rd = 0;
  uint32_t tma_phase = 0;  // kTma, kCopyWarps: bit b, the parity of buffer b's next phase
  if constexpr (!kCopyWarps) {
    loader_enter_tile(0);
    static_for<0, kStages - 1>([&]<int kP>() {
      issue_part.template operator()<kP>(kv_base + kP * kChunkElems * 2);
      cp_async_commit();
    });
  }
  // The L1-staged variant: the first kL1Ahead chunks after those into L1 (all in tile 0).
  static_for<kStages - 1, kStages - 1 + kL1Ahead>([&]<int kP>() {
    static_assert(kP < kChunksPerTile, "the prologue stays inside tile 0");
    constexpr bool rope = CK::template kRopePart<kP>;
    prefetch_l1((rope ? rope_src : lat_src) + CK::template kPartOff<kP>);
    if constexpr (kCols == 128 && !rope)
      prefetch_l1((rope ? rope_src : lat_src) + CK::template kPartOff<kP> + 64);
  });
  static_assert(kStages - 1 < kChunksPerTile, "the prologue stays inside tile 0");

  // Issues the chunk kStages - 1 ahead of part kPart into buffer wr (freed by the previous step),
  // entering the next tile at a compile-time known part.
  int late_wr = 0;  // MLAV_COPY_LATE: the buffer the step's deferred copy goes to
  auto issue_ahead = [&]<int kPart>(int tile, int wr) {
    constexpr int ahead = kPart + kStages - 1;
    constexpr int ahead_part = ahead % kChunksPerTile;
    if constexpr (ahead_part == 0) loader_enter_tile(tile + ahead / kChunksPerTile);
    issue_part.template operator()<ahead_part>(kv_base + wr * kChunkElems * 2);
    cp_async_commit();
    if constexpr (kL1Ahead > 0) {
      // The chunk kL1Ahead after the one just issued, into L1: in the loader's tile (whose
      // pointers are set) or the next one (its slot id was loaded when the loader entered this
      // one, at least kChunksPerTile - kL1Ahead steps ago). Each of a key's 4 threads touches
      // its own 32-byte sector of the key's 128-byte run, so the whole run is requested.
      constexpr int pf = ahead + kL1Ahead;
      constexpr int pf_part = pf % kChunksPerTile;
      constexpr bool pf_next = pf / kChunksPerTile != ahead / kChunksPerTile;
      constexpr bool rope = CK::template kRopePart<pf_part>;
      constexpr int off = CK::template kPartOff<pf_part>;
      const __nv_bfloat16* src;
      if constexpr (pf_next) {
        bool ok;
        src = key_src(tile + pf / kChunksPerTile, next_slot, rope, ok);
      } else {
        src = rope ? rope_src : lat_src;
      }
      prefetch_l1(src + off);
      if constexpr (kCols == 128 && !rope) prefetch_l1(src + off + 64);
    }
  };
  // One pipeline step for part kPart of the current tile: wait for its chunk, then issue the chunk
  // kStages - 1 ahead (under MLAV_COPY_LATE the caller issues it, inside the step's compute).
  // Every S and PV step has at least 4 k16 steps (kCols / 16 or kRopeDim / 16; PV's 4), so a
  // deferred copy is always issued: k above 4 would leave PV's chunks unissued and hang the ring.
  static_assert(MLAV_COPY_LATE >= 0 && MLAV_COPY_LATE <= 4, "MLAV_COPY_LATE: 0..4");
  static_assert(MLAV_COPY_LATE == 0 || (!kTma && !kSplitS), "MLAV_COPY_LATE: cp.async, no S split");
  auto step = [&]<int kPart>(int tile) -> uint32_t {
    MLAV_MT(const unsigned mt_w0 = static_cast<unsigned>(clock());)
#ifdef MLAV_NO_KV_WAIT
    // Timing-only (cuda/NOTES.md v24; it reads chunks that may not have landed): the copies are
    // issued as always, but a step does not wait for its own chunk, only for the one before it.
    cp_async_wait<kStages - 1>();
#else
    if constexpr (kCopyWarps) {
      // The copy warps' chunk landed (the barrier's phase completes after all 128 copy threads'
      // copies have): nothing to issue, no block barrier; the buffer goes back in `release`.
      mbar_wait(smem_addr(full_bar) + rd * 8, (tma_phase >> rd) & 1u);
      MLAV_MT(mt_w += static_cast<unsigned>(clock()) - mt_w0;)
      tma_phase ^= 1u << rd;
    } else if constexpr (kTma) {
      // This buffer's chunk landed (each thread acquires it itself); the fence orders this
      // thread's earlier generic accesses of the ring (ldmatrix, P's stores) before the TMA
      // writes that the barrier below lets warp 0 issue into the buffer freed last step.
      mbar_wait(smem_addr(full_bar) + rd * 8, (tma_phase >> rd) & 1u);
      tma_phase ^= 1u << rd;
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    } else {
      cp_async_wait<kStages - 2>();
    }
#endif
    if constexpr (!kCopyWarps) {
      __syncthreads();
      MLAV_MT(mt_w += static_cast<unsigned>(clock()) - mt_w0;)
      const int wr = rd == 0 ? kStages - 1 : rd - 1;
      if constexpr (MLAV_COPY_LATE == 0)
        issue_ahead.template operator()<kPart>(tile, wr);
      else
        late_wr = wr;
    }
    const uint32_t buf = kv_base + rd * kChunkElems * 2;
    rd = rd + 1 == kStages ? 0 : rd + 1;
    return buf;
  };

  // kTma: the Q tile's cp.async are the only ones; the first step's barrier publishes them.
  if constexpr (kTma) cp_async_wait<0>();
  // kCopyWarps: the math threads' own Q copies, published among them (no step barrier will).
  if constexpr (kCopyWarps) {
    cp_async_wait<0>();
    math_sync();
  }
  // kCopyWarps: this warp is done reading buffer `buf` (__syncwarp orders every lane's reads
  // before lane 0's release arrival; racecheck does not follow that, MLAV_COPY_WARPS=2 is the
  // form it can check); the copy warps may refill it.
  auto release = [&](uint32_t buf) {
    if constexpr (kCopyWarps) {
      const uint32_t bar = smem_addr(empty_bar) + ((buf - kv_base) / (kChunkElems * 2)) * 8;
      if constexpr (MLAV_COPY_WARPS == 2) {
        mbar_arrive(bar);
      } else {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
      }
    }
  };
  // The block barrier of the softmax: the math warps' alone when the copy warps run beside them.
  auto softmax_sync = [&] {
    if constexpr (kCopyWarps)
      math_sync();
    else
      __syncthreads();
  };
  MLAV_MT(const unsigned long long mt_loop = clock64(); mt_a = mt_loop;)
#pragma unroll 1
  for (int tile = 0; tile < num_tiles; ++tile) {
    MLAV_MT(mt_a = clock64();)
    const int64_t tile_key0 = key_begin + static_cast<int64_t>(tile) * kKvTile;

    // Draft visibility words for this tile, one per row: bit k = the row's node sees node
    // tile_key0 + k. Four threads per row decode 16 keys each (4 loads in flight at a time), then
    // OR their parts together. Written here, read after the S pass (at least 9 barriers later).
    if (is_draft) {
      const int r = tid >> 2, quarter = tid & 3;
      const BlockUnit u = unit_again(args);
      const int64_t row = static_cast<int64_t>(u.row_tile) * kRows + r;
      uint64_t bits = 0;
      // 4 reads in flight: fully unrolled, the 16 loads spill the 6-stage variant.
      if (row < valid_rows)
        bits = mask_row(p, u.req, e, static_cast<int32_t>(row / H))
                   .template bits<16, 4>(tile_key0 + quarter * 16, key_end)
               << (quarter * 16);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
      bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
      if (quarter == 0) vis_s[r] = bits;
    }

    // ---- S = Q K^T over 9 chunks: this warp's 16 rows x 32 keys ----
    float s_acc2[kSplitS ? 2 : 1][4][4];
#pragma unroll
    for (int mt = 0; mt < (kSplitS ? 2 : 1); ++mt)
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int f = 0; f < 4; ++f) s_acc2[mt][n][f] = 0.f;
    auto& s_acc = s_acc2[0];

    // kQRopeGlobal: this lane's k_pe A fragments (rows frag_row and + 8 of its row group,
    // columns ks * 16 + frag_col (+ 8)), in flight during the latent steps. Zeroed for the
    // front end, which cannot see that kernels without it never read it (no code: SASS unchanged).
    uint32_t qr[kQRopeGlobal ? kRopeDim / 16 : 1][4] = {};
    if constexpr (kSplitS) {
      // This warp's two m16 tiles (own rows, then the partner's) at its two k16 steps.
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int r0 = s_rq * 32 + ((mt ^ s_set) * 16) + frag_row;
        const unsigned int* qa = reinterpret_cast<const unsigned int*>(qrope_row[r0] + frag_col);
        const unsigned int* qb =
            reinterpret_cast<const unsigned int*>(qrope_row[r0 + 8] + frag_col);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          const int ks = s_set * 2 + kk;
          qr[mt * 2 + kk][0] = __ldg(qa + ks * 8);
          qr[mt * 2 + kk][1] = __ldg(qb + ks * 8);
          qr[mt * 2 + kk][2] = __ldg(qa + ks * 8 + 4);
          qr[mt * 2 + kk][3] = __ldg(qb + ks * 8 + 4);
        }
      }
    } else if constexpr (kQRopeGlobal) {
      // Two row pointers from the table, then 16 loads at constant offsets from them (v20;
      // before, each load redid a 64-bit offset sum, its scaling and a bounds test).
      const unsigned int* qa =
          reinterpret_cast<const unsigned int*>(qrope_row[rg * 16 + frag_row] + frag_col);
      const unsigned int* qb =
          reinterpret_cast<const unsigned int*>(qrope_row[rg * 16 + frag_row + 8] + frag_col);
#pragma unroll
      for (int ks = 0; ks < kRopeDim / 16; ++ks) {
        qr[ks][0] = __ldg(qa + ks * 8);
        qr[ks][1] = __ldg(qb + ks * 8);
        qr[ks][2] = __ldg(qa + ks * 8 + 4);
        qr[ks][3] = __ldg(qb + ks * 8 + 4);
      }
    }

    static_for<0, kKChunks>([&]<int kPart>() {
      const uint32_t buf = step.template operator()<kPart>(tile);
      if constexpr (kPInRing && kPart == kKChunks - 1) p_buf = buf;
      constexpr bool kQFromRegs = kQRopeGlobal && kPart == kKChunks - 1;
      constexpr int ksteps = kPart == kKChunks - 1 ? kRopeDim / 16 : kCols / 16;
      // k16 step ks's fragments: A (Q columns kPart * kCols + ks * 16; k_pe starts at 512 =
      // (kKChunks - 1) * kCols) and B for the warp's two 16-key pairs.
      auto load_a = [&](int ks, uint32_t (&a)[4]) {
        if constexpr (kQFromRegs) {
          a[0] = qr[ks][0], a[1] = qr[ks][1], a[2] = qr[ks][2], a[3] = qr[ks][3];
        } else {
          ldmatrix_x4(q_lane + kPart * kCols * 2 + (ks >> 2) * 128 + (xa0 ^ ((ks & 3) * 32)),
                      a[0], a[1], a[2], a[3]);
        }
      };
      auto load_b = [&](int ks, int pair, uint32_t (&b)[4]) {
        ldmatrix_x4(
            buf + kb_lane + pair * 16 * kRowBytes + (ks >> 2) * 128 + (xb0 ^ ((ks & 3) * 32)),
            b[0], b[1], b[2], b[3]);
      };
      if constexpr (kSplitS) {
        // Two k16 steps of this warp's set, 2 m16 tiles x 4 n8 tiles each.
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t a[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            if constexpr (kQFromRegs) {
#pragma unroll
              for (int f = 0; f < 4; ++f) a[mt][f] = qr[mt * 2 + kk][f];
            } else {
              ldmatrix_x4((mt == 0 ? q_lane : q_lane_other) + kPart * kCols * 2 +
                              (xa_set ^ (kk * 32)),
                          a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
            }
          }
#pragma unroll
          for (int pair = 0; pair < 2; ++pair) {
            uint32_t b[4];
            ldmatrix_x4(buf + kb_lane + pair * 16 * kRowBytes + (xb_set ^ (kk * 32)), b[0], b[1],
                        b[2], b[3]);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma_bf16(s_acc2[mt][pair * 2], a[mt], b[0], b[1]);
              mma_bf16(s_acc2[mt][pair * 2 + 1], a[mt], b[2], b[3]);
            }
          }
        }
        if constexpr (kPart != kKChunks - 1) release(buf);
        return;
      }
#pragma unroll
      for (int ks = 0; ks < ksteps; ++ks) {
        uint32_t a[4];
        load_a(ks, a);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          uint32_t b[4];
          load_b(ks, pair, b);
          mma_bf16(s_acc[pair * 2], a, b[0], b[1]);
          mma_bf16(s_acc[pair * 2 + 1], a, b[2], b[3]);
        }
        if constexpr (MLAV_COPY_LATE > 0)
          if (ks == MLAV_COPY_LATE - 1) issue_ahead.template operator()<kPart>(tile, late_wr);
      }
      // The k_pe chunk's buffer becomes P's: released once P is in registers (below).
      if constexpr (kPart != kKChunks - 1) release(buf);
    });

    if constexpr (kSplitS) {
      // The partner (warp ^ 4) holds the other half of the k16 steps of the same 32 x 32 scores:
      // each warp keeps m16 tile 0 (its own rows) and hands tile 1 over, through pair q's 2 KB of
      // the k_pe chunk's buffer (free once every warp is past that step: the block barrier), set
      // 0 first, then set 1 into the same bytes (each lane reads its slots before writing them).
      // Named barrier 1 + q holds the pair's 64 threads. P overwrites the buffer after the
      // softmax's first block barrier, when both rounds are read.
      softmax_sync();
      float4* xch = reinterpret_cast<float4*>(smem_raw + (p_buf - smem_base)) +
                    (warp & 3) * 4 * 32 + lane;
      auto pair_sync = [&] {
        asm volatile("bar.sync %0, 64;\n" ::"r"(1 + (warp & 3)) : "memory");
      };
      auto give = [&] {
#pragma unroll
        for (int n = 0; n < 4; ++n)
          xch[n * 32] = make_float4(s_acc2[1][n][0], s_acc2[1][n][1], s_acc2[1][n][2],
                                    s_acc2[1][n][3]);
      };
      auto take = [&] {
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          const float4 v = xch[n * 32];
          s_acc2[0][n][0] += v.x, s_acc2[0][n][1] += v.y, s_acc2[0][n][2] += v.z,
              s_acc2[0][n][3] += v.w;
        }
      };
      if (s_set == 0) give();
      pair_sync();
      if (s_set == 1) {
        take();
        give();
      }
      pair_sync();
      if (s_set == 0) take();
    }
    MLAV_MT(const unsigned long long mt_b = clock64(); mt_s += mt_b - mt_a; mt_a = mt_b;)
    // ---- online softmax over this 64-key tile (split_plan.h numerics 2) ----
    // Scores are kept in log2 units, t = s * log2(e), so each probability is one FFMA and one
    // softmax_exp2 (exp2f's MUFU.EX2, 2 ulp, the same bound as expf): p = 2^(t - m2) =
    // e^(s - m). gpu_bounds.h counts the extra fp32 roundings of the scaling.
    // Visible: inside the split (only the last tile of a split is partial) and, in the draft
    // block, the tree mask: a key limit and 32 visibility bits per row, branch-free.
    const int64_t left = key_end - tile_key0;
    const int key_limit = left < kKvTile ? static_cast<int>(left) : kKvTile;
    float tile_max[2] = {-INFINITY, -INFINITY};
    // vis is all ones outside the draft block; one 32-bit half of it per lane suffices, since a
    // lane's keys all lie in half `half` of the tile.
    uint32_t vis[2] = {~0u, ~0u};
    // kCopyWarps: no step barrier lies between vis_s's stores and these loads.
    if constexpr (kCopyWarps)
      if (is_draft) math_sync();
    if (is_draft) {
      vis[0] = static_cast<uint32_t>(vis_s[rg * 16 + frag_row] >> (half * 32));
      vis[1] = static_cast<uint32_t>(vis_s[rg * 16 + frag_row + 8] >> (half * 32));
    }
    // Keys of this half inside the split, as a mask; with the tree's bits and shifted by the
    // lane's first column, bit n * 8 + (f & 1) of vm says whether fragment (n, f) is visible.
    const int limit_in_half = key_limit - half * 32;
    const uint32_t in_split = limit_in_half >= 32  ? ~0u
                              : limit_in_half <= 0 ? 0u
                                                   : (1u << limit_in_half) - 1u;
    const uint32_t vm[2] = {(vis[0] & in_split) >> frag_col, (vis[1] & in_split) >> frag_col};
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int hr = f >> 1;  // fragments 0,1: row frag_row; 2,3: row frag_row + 8
        // key n * 8 + frag_col + (f & 1) within this warp's half
        const bool visible = (vm[hr] >> (n * 8 + (f & 1))) & 1u;
        const float t = visible ? s_acc[n][f] * scale_log2 : -INFINITY;
        s_acc[n][f] = t;
        tile_max[hr] = fmaxf(tile_max[hr], t);
      }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 1));
      tile_max[hr] = fmaxf(tile_max[hr], __shfl_xor_sync(0xffffffffu, tile_max[hr], 2));
      if ((lane & 3) == 0) red_max[half * kRows + rg * 16 + frag_row + 8 * hr] = tile_max[hr];
    }
    softmax_sync();
    float m_new[2], scale[2], part_sum[2] = {0.f, 0.f};
    // Every warp is past its k_pe step (the barrier above), so P may overwrite that buffer.
    __nv_bfloat16* p_tile = reinterpret_cast<__nv_bfloat16*>(smem_raw + (p_buf - smem_base));
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rg * 16 + frag_row + 8 * hr;
      m_new[hr] = fmaxf(m_run[hr], fmaxf(red_max[r], red_max[kRows + r]));  // >= -FLT_MAX
      // 2^0 = 1 on the empty state without a test; the 6-stage kernel keeps the test (the same
      // bits) because ptxas spills it without (12 bytes, v20), and the ring-4 kernel spills with.
      if constexpr (kStages == 6 && !kPInRing)
        scale[hr] = m_new[hr] == -FLT_MAX ? 1.f : softmax_exp2<kFtz>(m_run[hr] - m_new[hr]);
      else
        scale[hr] = softmax_exp2<kFtz>(m_run[hr] - m_new[hr]);
      if (half == 0 && (lane & 3) == 0) row_scale[r] = scale[hr];  // for the PV layout
    }
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const float t0 = s_acc[n][2 * hr], t1 = s_acc[n][2 * hr + 1];
        // Masked keys get probability exactly 0 (t = -inf, m_new finite: 2^-inf = 0). l
        // sums the unrounded fp32 values and the tensor cores get them rounded to bf16 (round
        // to nearest even).
        const float p0 = softmax_exp2<kFtz>(t0 - m_new[hr]);
        const float p1 = softmax_exp2<kFtz>(t1 - m_new[hr]);
        part_sum[hr] += p0 + p1;
        const int r = rg * 16 + frag_row + 8 * hr;
        const int key_local = half * 32 + n * 8 + frag_col;
        *reinterpret_cast<__nv_bfloat162*>(p_tile + r * kKvTile + swz(r, key_local >> 3) * 8 +
                                           frag_col) = __floats2bfloat162_rn(p0, p1);
      }
    }
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 1);
      part_sum[hr] += __shfl_xor_sync(0xffffffffu, part_sum[hr], 2);
      if ((lane & 3) == 0) red_sum[half * kRows + rg * 16 + frag_row + 8 * hr] = part_sum[hr];
    }
    softmax_sync();
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rg * 16 + frag_row + 8 * hr;
      l_run[hr] = l_run[hr] * scale[hr] + (red_sum[r] + red_sum[kRows + r]);
      m_run[hr] = m_new[hr];
    }
    // The PV layout's rows: rp * 32 + mt * 16 + frag_row (+ 8); their factors come from smem.
    float pv_scale[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
        pv_scale[mt][hr] = row_scale[rp * 32 + mt * 16 + frag_row + 8 * hr];
#pragma unroll
    for (int c = 0; c < kVChunks; ++c)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          acc[c][mt][n][0] *= pv_scale[mt][0];
          acc[c][mt][n][1] *= pv_scale[mt][0];
          acc[c][mt][n][2] *= pv_scale[mt][1];
          acc[c][mt][n][3] *= pv_scale[mt][1];
        }
    // P fragments for this warp's 32 rows x 64 keys, reused across every V chunk.
    uint32_t pa[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldmatrix_x4(p_buf + p_lane_off + mt * 16 * kKvTile * 2 + (xa0 ^ (ks * 32)), pa[mt][ks][0],
                    pa[mt][ks][1], pa[mt][ks][2], pa[mt][ks][3]);
    release(p_buf);

    MLAV_MT(const unsigned long long mt_c = clock64(); mt_sm += mt_c - mt_a; mt_a = mt_c;)
    // ---- O += P V over 8 chunks: this warp's 16 rows x 32 of each chunk's 64 columns ----
    static_for<0, kVChunks>([&]<int kC>() {
      const uint32_t buf = step.template operator()<kKChunks + kC>(tile);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
        for (int pair = 0; pair < CK::kPairs; ++pair) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4_trans(buf + vb_lane + ks * 16 * kRowBytes + (xv0 ^ (pair * 32)), b0, b1, b2,
                            b3);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_bf16(acc[kC][mt][pair * 2], pa[mt][ks], b0, b1);
            mma_bf16(acc[kC][mt][pair * 2 + 1], pa[mt][ks], b2, b3);
          }
        }
        if constexpr (MLAV_COPY_LATE > 0)
          if (ks == MLAV_COPY_LATE - 1)
            issue_ahead.template operator()<kKChunks + kC>(tile, late_wr);
      }
      release(buf);
    });
    MLAV_MT(const unsigned long long mt_d = clock64(); mt_pv += mt_d - mt_a; mt_a = mt_d;)
  }
  cp_async_wait<0>();
  if constexpr (kTma) {
    // The kStages - 1 chunks issued past the last one used are still landing in this block's
    // shared memory: wait for them before the block can end.
    if (warp == 0)
      for (int i = 0; i < kStages - 1; ++i) {
        const int b = (rd + i) % kStages;
        mbar_wait(smem_addr(full_bar) + b * 8, (tma_phase >> b) & 1u);
      }
  }

  // ---- write the normalized partial (split_plan.h numerics 3) ----
  const BlockUnit unit_end = unit_again(args);
  const int64_t partial = unit_end.split;
  row0 = static_cast<int64_t>(unit_end.row_tile) * kRows;
  const int64_t rows_total = p.max_total_q * H;
  // The S layout owns l and m: lse from there, 1 / l to the PV layout through smem.
  if (half == 0 && (lane & 3) == 0) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr)
      store_row_totals(args, partial, e, row0, valid_rows, rg * 16 + frag_row + 8 * hr, l_run[hr],
                       m_run[hr], row_inv_l);
  }
  softmax_sync();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int r = rp * 32 + mt * 16 + frag_row + 8 * hr;
      const int64_t row = row0 + r;
      if (row >= valid_rows) continue;
      const int64_t out_row = (e.q_begin + row / H) * H + row % H;
      const float inv = row_inv_l[r];
      float* o = args.ws_o + (partial * rows_total + out_row) * kLatentDim;
#pragma unroll
      for (int c = 0; c < kVChunks; ++c)
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          const int col = c * kCols + quarter * (kCols / 4) + n * 8 + frag_col;
          *reinterpret_cast<float2*>(o + col) =
              make_float2(acc[c][mt][n][2 * hr] * inv, acc[c][mt][n][2 * hr + 1] * inv);
        }
    }
#ifdef MLAV_MMA_TRACE
  if (tid == 0) {
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (b < kMmaTraceBlocks) {
      unsigned long long* t = g_mma_trace[b];
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      t[kMtTiles] = num_tiles, t[kMtPro] = mt_loop - mt_t0, t[kMtS] = mt_s, t[kMtSoftmax] = mt_sm;
      t[kMtPv] = mt_pv, t[kMtEpi] = clock64() - mt_a, t[kMtSm] = sm, t[kMtWait] = mt_w;
    }
    if (b == 0) g_mma_trace_grid[0] = gridDim.x, g_mma_trace_grid[1] = gridDim.y,
                g_mma_trace_grid[2] = gridDim.z;
  }
#endif
}

}  // namespace mlaverify::cuda::detail

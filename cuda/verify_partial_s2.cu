// Explicit instantiations of the sm_120-sized partial kernel (MLAV_CUDA_KERNEL=mma2): 64-column
// KV chunks in a ring of 2 buffers plus P, or of 3 buffers holding P in the ring (the same
// bytes), each plain or L1-staged (chunks prefetched into L1 l1_ahead chunks ahead); launcher.
// Built for every architecture: all fit sm_120's 101,376-byte block limit.
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

#if MLAV_TMA_KV
#include <cuda.h>
#include <cudaTypedefs.h>

#include <stdexcept>
#endif

#ifdef MLAV_MMA_TRACE
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#endif

namespace mlaverify::cuda::detail {

#ifdef MLAV_MMA_TRACE
// Prints the last traced launch (per-phase cycles of thread 0 of each block, cuda/NOTES.md v16)
// and clears the record: blocks with at least 4 tiles (the prefix blocks of the SPEC
// workloads), cycles per tile by phase, prologue and epilogue cycles, and the spread.
static void dump_mma_trace() {
  static unsigned long long tr[kMmaTraceBlocks][kMtFields];
  if (cudaDeviceSynchronize() != cudaSuccess) return;
  unsigned grid[3] = {0, 0, 0};
  CUDA_CHECK(cudaMemcpyFromSymbol(grid, g_mma_trace_grid, sizeof grid));
  CUDA_CHECK(cudaMemcpyFromSymbol(tr, g_mma_trace, sizeof tr));
  const unsigned nb = std::min(grid[0] * grid[1] * grid[2], kMmaTraceBlocks);
  double n = 0, tiles = 0, s = 0, sm = 0, pv = 0, pro = 0, epi = 0, wait = 0, lo = 1e30, hi = 0;
  unsigned short_blocks = 0;
  for (unsigned i = 0; i < nb; ++i) {
    const unsigned long long* t = tr[i];
    if (t[kMtTiles] == 0) continue;
    if (t[kMtTiles] < 4) { ++short_blocks; continue; }
    const double k = static_cast<double>(t[kMtTiles]);
    const double per = (t[kMtS] + t[kMtSoftmax] + t[kMtPv]) / k;
    n += 1, tiles += k, s += t[kMtS] / k, sm += t[kMtSoftmax] / k, pv += t[kMtPv] / k;
    wait += t[kMtWait] / k;
    pro += t[kMtPro], epi += t[kMtEpi], lo = std::min(lo, per), hi = std::max(hi, per);
  }
  if (n > 0)
    std::printf("MMATRACE grid %u %u %u: %.0f blocks with >= 4 tiles (%u shorter), %.1f tiles "
                "each; cycles per tile: S %.0f, softmax %.0f, PV %.0f, sum %.0f (blocks %.0f .. "
                "%.0f); prologue %.0f, epilogue %.0f cycles; chunk waits %.0f per tile (in S "
                "and PV)\n",
                grid[0], grid[1], grid[2], n, short_blocks, tiles / n, s / n, sm / n, pv / n,
                (s + sm + pv) / n, lo, hi, pro / n, epi / n, wait / n);
  static const unsigned long long zero[kMmaTraceBlocks][kMtFields] = {};
  const unsigned zg[3] = {0, 0, 0};
  CUDA_CHECK(cudaMemcpyToSymbol(g_mma_trace, zero, sizeof zero));
  CUDA_CHECK(cudaMemcpyToSymbol(g_mma_trace_grid, zg, sizeof zg));
}
#endif

// The default (cuda/NOTES.md v16d): 4 buffers with P in the ring, Q's k_pe from global memory.
// The v6 kernel (2 buffers and P) and ring 3 (v16b) stay for comparison, and the L1-staged ring
// of 3 (distance 2) for the RTX PRO 6000, whose latency hiding the H200 cannot show (v16:
// neutral on the H200). Distances measured in v16a (2 buffers: 2, 4, 8; 3 buffers: 4) are one
// line each to bring back.
template __global__ void verify_partial<2, 64, 0, false>(const __grid_constant__ PartialArgs);
template __global__ void verify_partial<3, 64, 0, true>(const __grid_constant__ PartialArgs);
template __global__ void verify_partial<3, 64, 2, true>(const __grid_constant__ PartialArgs);
template __global__ void verify_partial<4, 64, 0, true>(const __grid_constant__ PartialArgs);
#if MLAV_RING_EXTRA
// The timing-only deeper ring (verify_kernel.cuh): launched in ring 4's place.
template __global__ void verify_partial<4 + MLAV_RING_EXTRA, 64, 0, true>(
    const __grid_constant__ PartialArgs);
#endif
// The 3-buffer ring with P in it needs exactly the bytes of 2 buffers and P.
static_assert(kPElems == Chunking<64>::kElems, "P is one 64-column chunk buffer");

namespace {
using PartialFn = void (*)(const PartialArgs);

// Dynamic shared memory of a ring: the MLAV_TMA_KV variant of ring 4 adds its four mbarriers
// (32 bytes, 64 with the alignment kept), the MLAV_COPY_WARPS variant its eight (64 bytes).
constexpr int smem_of(int ring) {
  return sm120_smem_bytes(ring) + ((MLAV_TMA_KV || MLAV_COPY_WARPS) && ring == 4 ? 64 : 0);
}
static_assert(smem_of(4) <= kSm120SmemLimit, "sm_120 budget");

#if MLAV_TMA_KV
// The variant's kernel: ring 4 with its three tensor maps (the pool's latent view [pool_slots,
// 512], its k_pe view [pool_slots, 64], k_extend's rows [max_total_q, 576]) as a
// __grid_constant__ parameter, so cp.async.bulk.tensor reads them from parameter space and a
// captured graph replays each launch's own maps, with no copy of them on the stream.
struct TmaArgs : PartialArgs {
  CUtensorMap maps[3];
};
constexpr auto verify_partial_tma = verify_partial<4 + MLAV_RING_EXTRA, 64, 0, true, TmaArgs>;

// The maps of one launch, encoded on the host (cuTensorMapEncodeTiled, a host function: nothing
// is enqueued). Box: one row x 64 columns, the 128-byte swizzle.
void kv_tensor_maps(const VerifyParams& p, CUtensorMap* maps) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult found;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled",
                                                reinterpret_cast<void**>(&encode), 12000,
                                                cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess) throw std::runtime_error("no cuTensorMapEncodeTiled");
  }
  auto map = [&](CUtensorMap* m, const void* base, uint64_t cols, uint64_t rows, int64_t stride) {
    if (rows > uint64_t{INT32_MAX} || (reinterpret_cast<uintptr_t>(base) & 15) || stride % 8)
      throw std::runtime_error("MLAV_TMA_KV: the KV source is not TMA-addressable");
    const cuuint64_t dims[2] = {cols, rows == 0 ? 1 : rows};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * 2};
    // (MLAV_TMA_KV=6: a box of 64 rows, one chunk of a tile whose slots are one run.)
    const cuuint32_t box[2] = {64, MLAV_TMA_KV == 6 ? 64u : 1u}, step[2] = {1, 1};
    if (encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
               step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      throw std::runtime_error("MLAV_TMA_KV: cuTensorMapEncodeTiled failed");
  };
  const auto* pool = static_cast<const __nv_bfloat16*>(p.kv_pool);
  map(maps + 0, pool + p.kv_layout.latent_offset, kLatentDim, p.pool_slots,
      p.kv_layout.latent_stride);
  map(maps + 1, pool + p.kv_layout.rope_offset, kRopeDim, p.pool_slots, p.kv_layout.rope_stride);
  if (p.k_extend != nullptr)
    map(maps + 2, p.k_extend, kRowDim, p.max_total_q, p.k_extend_stride);
  else
    maps[2] = maps[0];
}

// The variant's arguments: the plan's with the three tensor maps added.
cudaError_t launch_tma(const PartialArgs& args, dim3 uniform_grid, int smem, cudaStream_t stream) {
  TmaArgs t;
  static_cast<PartialArgs&>(t) = args;
  kv_tensor_maps(args.p, t.maps);
  return launch_partial_kernel(verify_partial_tma, t, uniform_grid, smem, stream);
}
#endif
PartialFn sm120_kernel(int ring, int l1_ahead) {
  if (ring == 2 && l1_ahead == 0) return verify_partial<2, 64, 0, false>;
  if (ring == 3 && l1_ahead == 0) return verify_partial<3, 64, 0, true>;
  if (ring == 3 && l1_ahead == 2) return verify_partial<3, 64, 2, true>;
  if (ring == 4 && l1_ahead == 0) return verify_partial<4 + MLAV_RING_EXTRA, 64, 0, true>;
  return nullptr;
}
// The kernel a ring launches, for its attributes and residency (the variant's kernel has its own
// parameter type).
const void* sm120_entry(int ring, int l1_ahead) {
#if MLAV_TMA_KV
  if (ring == 4 && l1_ahead == 0) return reinterpret_cast<const void*>(verify_partial_tma);
#endif
  return reinterpret_cast<const void*>(sm120_kernel(ring, l1_ahead));
}
}  // namespace

bool stages2_supported(int ring, int l1_ahead) { return sm120_kernel(ring, l1_ahead) != nullptr; }

void prepare_partial_stages2(int ring, int l1_ahead, int carveout_percent) {
#ifdef MLAV_MMA_TRACE
  static bool at_exit = false;
  if (!at_exit) at_exit = std::atexit(dump_mma_trace) == 0;  // the last workload's record
  dump_mma_trace();
#endif
  const void* k = sm120_entry(ring, l1_ahead);
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem_of(ring)));
  CUDA_CHECK(
      cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, carveout_percent));
}

int blocks_per_sm_stages2(int ring, int l1_ahead) {
  const void* k = sm120_entry(ring, l1_ahead);
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem_of(ring)));
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, partial_threads(ring),
                                                           smem_of(ring)));
  return n;
}

void launch_partial_stages2(const PartialArgs& args, CUstream_st* stream, int ring, int l1_ahead) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
#if MLAV_TMA_KV
  if (ring == 4) {
    CUDA_CHECK(launch_tma(args, grid, smem_of(ring), stream));
    return;
  }
#endif
  CUDA_CHECK(launch_partial_kernel(sm120_kernel(ring, l1_ahead), args, grid,
                                   smem_of(ring), stream, partial_threads(ring)));
}

}  // namespace mlaverify::cuda::detail

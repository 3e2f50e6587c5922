// Explicit instantiations of the sm_120-sized partial kernel (MLAV_CUDA_KERNEL=mma2): 64-column
// KV chunks in a ring of 2 buffers plus P, or of 3 buffers holding P in the ring (the same
// bytes), each plain or L1-staged (chunks prefetched into L1 l1_ahead chunks ahead); launcher.
// Built for every architecture: all fit sm_120's 101,376-byte block limit.
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

// The default (cuda/NOTES.md v16d): 4 buffers with P in the ring, Q's k_pe from global memory.
// The v6 kernel (2 buffers and P) and ring 3 (v16b) stay for comparison, and the L1-staged ring
// of 3 (distance 2) for the RTX PRO 6000, whose latency hiding the H200 cannot show (v16:
// neutral on the H200). Distances measured in v16a (2 buffers: 2, 4, 8; 3 buffers: 4) are one
// line each to bring back.
template __global__ void verify_partial<2, 64, 0, false>(const PartialArgs);
template __global__ void verify_partial<3, 64, 0, true>(const PartialArgs);
template __global__ void verify_partial<3, 64, 2, true>(const PartialArgs);
template __global__ void verify_partial<4, 64, 0, true>(const PartialArgs);
// The 3-buffer ring with P in it needs exactly the bytes of 2 buffers and P.
static_assert(kPElems == Chunking<64>::kElems, "P is one 64-column chunk buffer");

namespace {
using PartialFn = void (*)(const PartialArgs);
PartialFn sm120_kernel(int ring, int l1_ahead) {
  if (ring == 2 && l1_ahead == 0) return verify_partial<2, 64, 0, false>;
  if (ring == 3 && l1_ahead == 0) return verify_partial<3, 64, 0, true>;
  if (ring == 3 && l1_ahead == 2) return verify_partial<3, 64, 2, true>;
  if (ring == 4 && l1_ahead == 0) return verify_partial<4, 64, 0, true>;
  return nullptr;
}
}  // namespace

bool stages2_supported(int ring, int l1_ahead) { return sm120_kernel(ring, l1_ahead) != nullptr; }

void prepare_partial_stages2(int ring, int l1_ahead, int carveout_percent) {
  PartialFn k = sm120_kernel(ring, l1_ahead);
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  sm120_smem_bytes(ring)));
  CUDA_CHECK(
      cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, carveout_percent));
}

int blocks_per_sm_stages2(int ring, int l1_ahead) {
  PartialFn k = sm120_kernel(ring, l1_ahead);
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  sm120_smem_bytes(ring)));
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, kThreads, sm120_smem_bytes(ring)));
  return n;
}

void launch_partial_stages2(const PartialArgs& args, CUstream_st* stream, int ring, int l1_ahead) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  sm120_kernel(ring, l1_ahead)<<<grid, kThreads, sm120_smem_bytes(ring), stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

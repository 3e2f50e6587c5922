// Explicit instantiations of the partial kernel with 2 KV chunk buffers of 64 columns (the
// sm_120-sized kernel), plain and L1-staged (kL1Ahead chunks prefetched into L1), launcher.
// Built for every architecture: they fit sm_120's 101,376-byte block limit.
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

template __global__ void verify_partial<2, 64, 0>(const PartialArgs);
template __global__ void verify_partial<2, 64, 2>(const PartialArgs);
template __global__ void verify_partial<2, 64, 4>(const PartialArgs);
template __global__ void verify_partial<2, 64, 8>(const PartialArgs);

namespace {
using PartialFn = void (*)(const PartialArgs);
PartialFn stages2_kernel(int l1_ahead) {
  switch (l1_ahead) {
    case 0: return verify_partial<2, 64, 0>;
    case 2: return verify_partial<2, 64, 2>;
    case 4: return verify_partial<2, 64, 4>;
    case 8: return verify_partial<2, 64, 8>;
  }
  return nullptr;
}
}  // namespace

bool stages2_l1_supported(int l1_ahead) { return stages2_kernel(l1_ahead) != nullptr; }

void prepare_partial_stages2(int l1_ahead, int carveout_percent) {
  PartialFn k = stages2_kernel(l1_ahead);
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  partial_smem_bytes(2, 64)));
  CUDA_CHECK(
      cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, carveout_percent));
}

void launch_partial_stages2(const PartialArgs& args, CUstream_st* stream, int l1_ahead) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  stages2_kernel(l1_ahead)<<<grid, kThreads, partial_smem_bytes(2, 64), stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

// Explicit instantiation of the partial kernel with 6 KV chunk buffers of 64 columns, launcher.
// Built for sm_90 only (cuda/CMakeLists.txt): it needs more shared memory than sm_120 has.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

template __global__ void verify_partial<6, 64>(const __grid_constant__ PartialArgs);

void prepare_partial_stages6() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial<6, 64>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  partial_smem_bytes(6, 64)));
}

int blocks_per_sm_stages6() {
  prepare_partial_stages6();
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, verify_partial<6, 64>, kThreads,
                                                           partial_smem_bytes(6, 64)));
  return n;
}

void launch_partial_stages6(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  CUDA_CHECK(launch_partial_kernel(verify_partial<6, 64>, args, grid, partial_smem_bytes(6, 64),
                                   stream));
}

}  // namespace mlaverify::cuda::detail

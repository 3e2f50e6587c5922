// Explicit instantiation of the 16-warp partial kernel, 6 KV chunk buffers of 128 columns (9 chunk
// steps per tile) for sm_90 only (cuda/CMakeLists.txt): more shared memory than sm_120 has.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel_w16.cuh"

namespace mlaverify::cuda::detail {

template __global__ void verify_partial_w16<6, 128>(const PartialArgs);

void prepare_partial_w16_stages6_cols128() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_w16<6, 128>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  partial_smem_bytes_w16(6, 128)));
}

void launch_partial_w16_stages6_cols128(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  verify_partial_w16<6, 128><<<grid, kThreadsW16, partial_smem_bytes_w16(6, 128), stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

// Explicit instantiation of the 16-warp partial kernel with 6 KV chunk buffers of 64 columns.
// Built for sm_90 only (cuda/CMakeLists.txt): it needs more shared memory than sm_120 has.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel_w16.cuh"

namespace mlaverify::cuda::detail {

template __global__ void verify_partial_w16<6, 64>(const PartialArgs);

void prepare_partial_w16_stages6() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_w16<6, 64>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  partial_smem_bytes_w16(6, 64)));
}

void launch_partial_w16_stages6(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  verify_partial_w16<6, 64><<<grid, kThreadsW16, partial_smem_bytes_w16(6, 64), stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

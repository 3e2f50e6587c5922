// Explicit instantiation of the 16-warp partial kernel with 2 KV chunk buffers of 64 columns.
// Built for every architecture: it fits sm_120's 101,376-byte block limit.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel_w16.cuh"

namespace mlaverify::cuda::detail {

template __global__ void verify_partial_w16<2, 64>(const PartialArgs);

void prepare_partial_w16_stages2() {
  CUDA_CHECK(cudaFuncSetAttribute(verify_partial_w16<2, 64>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  partial_smem_bytes_w16(2, 64)));
}

void launch_partial_w16_stages2(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(row_tiles(p.max_draft, p.num_heads)),
            static_cast<unsigned>(p.batch_size), static_cast<unsigned>(p.num_splits + 1));
  verify_partial_w16<2, 64><<<grid, kThreadsW16, partial_smem_bytes_w16(2, 64), stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

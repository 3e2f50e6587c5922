// A kernel that faults on purpose (a store through a null pointer: cudaErrorIllegalAddress, which
// poisons the CUDA context), for the test that CudaBackend reports the lost context (BackendLost).
#include <cuda_runtime.h>

#include "tests/cuda/fault_kernel.h"

namespace mlaverify::cuda::testing {
namespace {
__global__ void store_through_null(int* p) { *p = 1; }
}  // namespace

cudaError_t fault_the_context() {
  store_through_null<<<1, 1>>>(nullptr);
  return cudaDeviceSynchronize();
}

}  // namespace mlaverify::cuda::testing

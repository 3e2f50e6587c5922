// fault_kernel.cu: lose the CUDA context on purpose.
#pragma once

#include <cuda_runtime.h>

namespace mlaverify::cuda::testing {

// Launches a kernel that stores through a null pointer and waits for it: returns the sticky
// error (cudaErrorIllegalAddress) that every later runtime call in the process then reports.
cudaError_t fault_the_context();

}  // namespace mlaverify::cuda::testing

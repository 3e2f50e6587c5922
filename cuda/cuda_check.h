// One checking macro for every CUDA runtime call: a failure throws with the file and line.
// Host-only; included by .cu files and by the backend's host code (which links cudart).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mlaverify::cuda {

// A CUDA runtime failure: what() names the call site and the runtime's own message.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file,
                                          int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                  " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace mlaverify::cuda

#define CUDA_CHECK(expr)                                                              \
  do {                                                                                \
    cudaError_t mlav_cuda_err_ = (expr);                                              \
    if (mlav_cuda_err_ != cudaSuccess) {                                              \
      ::mlaverify::cuda::throw_cuda_error(mlav_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

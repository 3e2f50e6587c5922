// Event timing for the GPU benchmark: the median of `reps` timed calls of `launch` after
// `warmups` untimed ones, each bracketed by CUDA events on `stream` (milliseconds).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/cuda_check.h"

namespace mlaverify::bench {

template <class Launch>
float median_ms(int warmups, int reps, Launch&& launch, cudaStream_t stream = nullptr) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warmups + reps; ++i) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    launch(i);
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float t;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warmups) ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace mlaverify::bench

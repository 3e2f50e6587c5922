// Marks functions shared by host code and CUDA device code without including CUDA headers.
#pragma once

#if defined(__CUDACC__)
#define MLAV_HD __host__ __device__ __forceinline__
#else
#define MLAV_HD inline
#endif

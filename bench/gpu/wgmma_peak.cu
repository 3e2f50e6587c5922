// wgmma ceilings for verify_bench (sm_90a only): the two shapes the Hopper kernel issues, both
// operands read from shared memory (128-byte swizzle), two warpgroups per CTA and one CTA per SM
// like the kernel, so the rate includes the shared-memory operand traffic the kernel pays:
//   S-like:  m64n64k16, A and B K-major (each instruction reads 2 KB + 2 KB)
//   PV-like: m64n256k16, B N-major (2 KB + 8 KB)
// Random bf16 operands in [1, 2) (zeros run faster on some parts).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "bench/gpu/timing.h"
#include "cuda/cuda_check.h"
#include "cuda/wgmma_ops.cuh"

namespace mlaverify::bench {
namespace {

using namespace cuda::detail;  // the kernel's descriptors, fences and wgmma wrappers

// The 64-bit form of sw128_desc, computed whole (as measured; the kernel's desc_at adds its
// anti-hoisting barrier, which a loop of constant addresses does not need).
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  const Desc d = sw128_desc(addr, lbo, sbo);
  return (static_cast<uint64_t>(d.hi) << 32) | d.lo;
}

// kWgs warpgroups per CTA, each running its own chain; kRs: A (the S-like Q operand) from
// registers, loaded once with ldmatrix, as the v13 kernel holds Q.
template <int kN, int kWgs, bool kRs>
__global__ void __launch_bounds__(256, 1) wgmma_loop(float* sink, int iters, uint32_t seed) {
  extern __shared__ __align__(1024) unsigned char sm[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(sm)) + 1023u) & ~1023u;
  unsigned char* p = sm + (base - static_cast<uint32_t>(__cvta_generic_to_shared(sm)));
  // A: 64 x 64 bf16 (8 KB), B: 256 x 64 or 64 x 256 bf16 (32 KB), per warpgroup.
  constexpr int kBytes = 2 * (8192 + 32768);
  uint32_t h = (blockIdx.x * 256 + threadIdx.x) * 2654435761u ^ seed;
  for (int i = threadIdx.x; i < kBytes / 4; i += blockDim.x) {
    h ^= h << 13, h ^= h >> 17, h ^= h << 5;
    reinterpret_cast<uint32_t*>(p)[i] = 0x3f803f80u | (h & 0x007f007fu);
  }
  fence_proxy_async();
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x >> 7, 0);
  const uint32_t a = base + wg * (8192 + 32768);
  const uint32_t b = a + 8192;
  float d[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) d[i] = 0.f;
  uint32_t af[4][4];
  if constexpr (kRs) {
    const int lane = threadIdx.x & 31, r = ((threadIdx.x >> 5) & 3) * 16 + (lane & 15);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(af[k][0]), "=r"(af[k][1]), "=r"(af[k][2]), "=r"(af[k][3])
                   : "r"(a + r * 128 + (((2 * k + (lane >> 4)) ^ (r & 7)) * 16)));
  }
  wgmma_fence();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t da = desc(a + k * 32, 16, 1024);
      if constexpr (kN == 64 && kRs) {
        wgmma_m64n64k16_rs(d, af[k], desc(b + k * 32, 16, 1024), 1);
      } else if constexpr (kN == 64) {
        wgmma_m64n64k16_ss(d, da, desc(b + k * 32, 16, 1024), 1);
      } else {
        wgmma_m64n256k16_ss(d, da, desc(b + k * 2048, 8192, 1024), 1);
      }
    }
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) s += d[i];
  if (s == 1234.5f) sink[0] = s;  // keeps the loop alive; never true for these operands
}

template <int kN, int kWgs = 2, bool kRs = false>
double run(int sms) {
  float* sink;
  CUDA_CHECK(cudaMalloc(&sink, 4));
  const int smem = 2 * (8192 + 32768) + 1024, iters = 2048;
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_loop<kN, kWgs, kRs>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const float ms = median_ms(2, 5, [&](int i) {
    wgmma_loop<kN, kWgs, kRs><<<sms, 128 * kWgs, smem>>>(sink, iters, 777u + i);
    CUDA_CHECK(cudaGetLastError());
  });
  CUDA_CHECK(cudaFree(sink));
  const double flops = double(sms) * kWgs * iters * 4 * (2.0 * 64 * kN * 16);
  return flops / (ms * 1e-3) / 1e12;
}

}  // namespace

// TFLOP/s of the S-like and PV-like wgmma loops (see the file comment).
void wgmma_ceilings(int sms, double* s_like, double* pv_like) {
  *s_like = run<64>(sms);
  *pv_like = run<256>(sms);
}

// The same loops issued by one warpgroup per SM (the v13 kernel's tensor work comes from one
// warpgroup at a time): S-like with A in smem, S-like with A in registers, PV-like.
void wgmma_one_warpgroup(int sms, double* s_ss, double* s_rs, double* pv) {
  *s_ss = run<64, 1, false>(sms);
  *s_rs = run<64, 1, true>(sms);
  *pv = run<256, 1, false>(sms);
}

}  // namespace mlaverify::bench

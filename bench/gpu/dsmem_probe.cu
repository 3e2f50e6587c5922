// What a per-tile exchange between the two CTAs of a cluster costs (cuda/NOTES.md v18, the
// sm_120 redesign's first question): a 2-CTA split of the verify tile (each CTA half of S's
// 576 columns and half of O's 512) must swap its 64 x 64 fp32 partial scores (16 KB) or its
// bf16 probabilities (8 KB) through distributed shared memory once per 64-key tile, and the
// tile's budget at issue 13's 40% target is ~8K cycles.
//
// Every CTA of a cluster of 2 (one per SM, 256 threads, grid filling the device) repeats, for
// `iters` iterations: write `bytes` into its peer's shared memory (st to the mapa'd address,
// 16 bytes per store), one cluster barrier (arrive.release / wait.acquire), read the `bytes`
// its peer wrote into its own buffer and fold them into a register. Buffers alternate, so one
// barrier per iteration is enough (a buffer is rewritten two barriers after it was read). The
// baselines: the barrier alone; the same bytes written and read in the CTA's own shared memory
// with __syncthreads. Cycles per iteration (clock64, thread 0, median over CTAs).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda/cuda_check.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBytes = 32 * 1024;  // per buffer; two buffers

enum Mode { kBarrierOnly = 0, kDsmem = 1, kLocal = 2 };

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    exchange(int mode, int bytes, int iters, long long* cycles, float* sink) {
  extern __shared__ float4 buf[];  // [2][kMaxBytes / 16]
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned peer = cluster.block_rank() ^ 1u;
  float4* peer_buf = cluster.map_shared_rank(buf, peer);
  const int per_buffer = kMaxBytes / 16;
  const int units = bytes / 16;  // float4 per iteration, spread over the threads
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  cluster.sync();  // every CTA of the cluster is running before its memory is written
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
    const int b = (it & 1) * per_buffer;
    if (mode == kDsmem) {
      for (int u = threadIdx.x; u < units; u += kThreads)
        peer_buf[b + u] = make_float4(it, u, 1.f, 2.f);
      cluster.sync();
    } else if (mode == kLocal) {
      for (int u = threadIdx.x; u < units; u += kThreads) buf[b + u] = make_float4(it, u, 1.f, 2.f);
      __syncthreads();
    } else {
      cluster.sync();
    }
    if (mode != kBarrierOnly) {
      for (int u = threadIdx.x; u < units; u += kThreads) {
        const float4 v = buf[b + u];
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
    }
  }
  const long long t1 = clock64();
  cluster.sync();  // no CTA leaves while its peer may still write into it
  if (threadIdx.x == 0) cycles[blockIdx.x] = (t1 - t0) / iters;
  if (acc.x == 12345.f) sink[blockIdx.x] = acc.y + acc.z + acc.w;  // keep the reads
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("dsmem_probe: needs thread block clusters (sm_90 or later); this is sm_%d%d\n",
                prop.major, prop.minor);
    return 0;
  }
  const int smem = 2 * kMaxBytes;
  CUDA_CHECK(cudaFuncSetAttribute(exchange, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = prop.multiProcessorCount / 2 * 2;
  long long* d_cycles;
  float* d_sink;
  CUDA_CHECK(cudaMalloc(&d_cycles, blocks * sizeof(long long)));
  CUDA_CHECK(cudaMalloc(&d_sink, blocks * sizeof(float)));
  std::printf("dsmem_probe: %s, %d SMs, clusters of 2 CTAs x %d threads, %d CTAs; cycles per "
              "iteration (median over CTAs, min .. max)\n",
              prop.name, prop.multiProcessorCount, kThreads, blocks);
  const int iters = 2000;
  struct Row {
    const char* name;
    int mode, bytes;
  };
  const Row rows[] = {{"cluster barrier alone", kBarrierOnly, 0},
                      {"DSMEM 8 KB (P, bf16) + cluster barrier", kDsmem, 8 * 1024},
                      {"DSMEM 16 KB (S partial, fp32) + cluster barrier", kDsmem, 16 * 1024},
                      {"DSMEM 32 KB + cluster barrier", kDsmem, 32 * 1024},
                      {"local smem 8 KB + __syncthreads", kLocal, 8 * 1024},
                      {"local smem 16 KB + __syncthreads", kLocal, 16 * 1024},
                      {"local smem 32 KB + __syncthreads", kLocal, 32 * 1024}};
  for (const Row& r : rows) {
    for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
      exchange<<<blocks, kThreads, smem>>>(r.mode, r.bytes, iters, d_cycles, d_sink);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaDeviceSynchronize());
    }
    std::vector<long long> c(blocks);
    CUDA_CHECK(cudaMemcpy(c.data(), d_cycles, blocks * sizeof(long long), cudaMemcpyDeviceToHost));
    std::sort(c.begin(), c.end());
    std::printf("  %-48s %6lld  (%lld .. %lld)\n", r.name, c[c.size() / 2], c.front(), c.back());
  }
  CUDA_CHECK(cudaFree(d_cycles));
  CUDA_CHECK(cudaFree(d_sink));
  return 0;
}

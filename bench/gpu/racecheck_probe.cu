// Does compute-sanitizer racecheck model producer/consumer named barriers (bar.arrive on one
// side, bar.sync on the other)? PTX says they order memory: "barrier.arrive guarantees that when
// the barrier completes, prior memory accesses requested by this thread are performed relative
// to all threads participating in the barrier". This kernel is race-free by that rule (the same
// handshake the wgmma kernel uses for its row factors); `--variant sync` does the same with
// bar.sync on both sides. Run both under racecheck: hazards on `arrive` alone are the tool's.
// `--variant sync_partial` is `sync` plus a barrier over warpgroup 0 alone (bar.sync 3, 128) each
// round and one over warpgroup 1 alone (bar.sync 4, 128), as the ws kernel's S and PV warps
// have beside their hand-overs (cuda/NOTES.md v35): also race-free by the same rule.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_sync_wg(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

// Warpgroup 0 writes v[], signals FULL; warpgroup 1 reads it, signals EMPTY; repeat.
__global__ void handshake(float* out, int rounds, bool arrive_only, bool partial) {
  __shared__ float v[128];
  const int t = threadIdx.x & 127;
  float acc = 0.f;
  if (threadIdx.x < 128) {
    for (int r = 0; r < rounds; ++r) {
      if (r > 0) bar_sync(2);  // EMPTY: warpgroup 1 finished reading round r - 1
      if (partial) bar_sync_wg(3);
      v[t] = static_cast<float>(r * 128 + t);
      if (arrive_only)
        bar_arrive(1);
      else
        bar_sync(1);  // FULL
    }
  } else {
    for (int r = 0; r < rounds; ++r) {
      bar_sync(1);
      acc += v[127 - t];
      if (partial) bar_sync_wg(4);
      if (r + 1 < rounds) {
        if (arrive_only)
          bar_arrive(2);
        else
          bar_sync(2);
      }
    }
    out[t] = acc;
  }
}

int main(int argc, char** argv) {
  const bool variant = argc > 2 && std::strcmp(argv[1], "--variant") == 0;
  const bool partial = variant && std::strcmp(argv[2], "sync_partial") == 0;
  const bool arrive_only = !(variant && (partial || std::strcmp(argv[2], "sync") == 0));
  float* out;
  cudaMalloc(&out, 128 * sizeof(float));
  handshake<<<1, 256>>>(out, 8, arrive_only, partial);
  float h[128];
  cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
  // Thread t sums v[127 - t] over rounds r: 128 * sum(r) + 8 * (127 - t).
  int bad = 0;
  for (int t = 0; t < 128; ++t)
    if (h[t] != 128.f * 28 + 8.f * (127 - t)) ++bad;
  std::printf("racecheck_probe (%s): %s\n",
              arrive_only ? "arrive/sync"
              : partial   ? "sync/sync + partial"
                          : "sync/sync",
              bad ? "WRONG VALUES" : "values right");
  return bad ? 1 : 0;
}

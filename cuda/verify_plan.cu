// The balanced split plan on the device (split_plan.h, issue 13): one block reads every request's
// lengths from the metadata buffers, picks the batch's chunk (plan_chunk, the same function the
// CPU backend runs serially), and writes each request's split count and the list of work units
// the partial kernel's blocks take. Nothing is read on the host, so a captured graph replays
// with new lengths correctly.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

#ifdef MLAV_PLAN_TRACE
#include <cstdio>
#endif

namespace mlaverify::cuda::detail {

#ifdef MLAV_PLAN_TRACE
// Timing-only builds (never the kernel): thread 0 of the planning kernel stamps %globaltimer at
// each phase; launch_plan prints the previous launch's stamps (ns after the first) every 64th
// call. UNIT=verify_plan scripts/variant_bench.sh plantrace cuda/verify_plan.cu -DMLAV_PLAN_TRACE
// The stamps go to mapped host memory (allocated before main, so before any graph capture):
// the host reads them with no CUDA call, which a capturing thread may not make.
enum PlanTracePoint { kPtStart, kPtLoaded, kPtReduced, kPtChunk, kPtCounted, kPtEnd, kPtPoints };
__device__ unsigned long long* g_plan_trace;
static unsigned long long* h_plan_trace = [] {
  unsigned long long *h = nullptr, *d = nullptr;
  CUDA_CHECK(cudaHostAlloc(&h, kPtPoints * sizeof *h, cudaHostAllocMapped));
  CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
  CUDA_CHECK(cudaMemcpyToSymbol(g_plan_trace, &d, sizeof d));
  return h;
}();
__device__ __forceinline__ void plan_stamp(int at) {
  if (threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    reinterpret_cast<volatile unsigned long long*>(g_plan_trace)[at] = t;
  }
}
#define MLAV_PT(at) plan_stamp(at)
#else
#define MLAV_PT(at)
#endif

namespace {
// Four warps: the plan is a few block-wide sums over at most a few thousand requests (one for
// the batch's totals, one per probe of plan_chunk: 1-2 for batches of equal requests, up to ~12
// when its search runs), each bound by barrier latency, not arithmetic. Requests 0 ..
// kPlanCache - 1 are read from the metadata once into shared memory (every probe reads them);
// any beyond are re-read from global memory (the same function, slower).
constexpr int kPlanThreads = 128;
constexpr int kPlanWarps = kPlanThreads / 32;
constexpr int kPlanCache = 4096;
// Unit order: prefix units by size, largest first (an approximate longest-first schedule: size
// s of chunk C goes to bucket kBuckets - 1 - min(kBuckets - 1, (kBuckets - 1) * s / C)), then
// the unfolded plan's draft units. Order affects only which block runs a unit, never its sums.
constexpr int kBuckets = 9;
}  // namespace

__global__ void __launch_bounds__(kPlanThreads, 1) verify_plan(const PartialArgs args) {
  // The partial kernel may launch now; it waits (griddepcontrol.wait) for this grid's writes.
  MLAV_PT(kPtStart);
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const VerifyParams& p = args.p;
  const int32_t bs = p.batch_size, cap = p.num_splits;
  __shared__ int32_t s_tiles[kPlanCache], s_rt[kPlanCache];
  __shared__ int64_t red[2][kPlanWarps];  // two buffers: one barrier per block-wide sum
  __shared__ int32_t count[kBuckets + 1], cursor[kBuckets + 1];
  auto tiles_global = [&](int32_t i) {
    const RequestExtent e = request_extent(p, i);
    return plan_tiles(e.prefix_len, e.draft_nodes, args.folded);
  };
  auto rt_global = [&](int32_t i) {
    return plan_row_tiles(p.qo_indptr[i + 1] - p.qo_indptr[i], p.num_heads);
  };
  auto tiles_of = [&](int32_t i) { return i < kPlanCache ? s_tiles[i] : tiles_global(i); };
  auto rt_of = [&](int32_t i) { return i < kPlanCache ? s_rt[i] : rt_global(i); };
  int parity = 0;
  // Sum over the block (the probes' big blocks), every thread gets it.
  auto block_sum = [&](int64_t v) {
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) red[parity][threadIdx.x >> 5] = v;
    __syncthreads();
    int64_t r = red[parity][0];
#pragma unroll
    for (int w = 1; w < kPlanWarps; ++w) r += red[parity][w];
    parity ^= 1;  // the next sum writes the other buffer; the one after is past a barrier
    return r;
  };
  int64_t my_max = 0, my_work = 0, my_busy = 0;
  for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
    const int32_t t = tiles_global(i), rt = rt_global(i);
    if (i < kPlanCache) s_tiles[i] = t, s_rt[i] = rt;
    my_max = t > my_max ? t : my_max;
    my_work += int64_t{t} * rt;
    my_busy += t > 0 ? rt : 0;
  }
  if (threadIdx.x <= kBuckets) count[threadIdx.x] = 0;
  MLAV_PT(kPtLoaded);
  // The batch's max tiles, work and busy row tiles in one block-wide pass (one barrier, which
  // also publishes the cache); its own buffer, read once, so no later sum overwrites it early.
  __shared__ int64_t red3[3][kPlanWarps];
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) {
    const int64_t m = __shfl_xor_sync(0xffffffffu, my_max, off);
    my_max = m > my_max ? m : my_max;
    my_work += __shfl_xor_sync(0xffffffffu, my_work, off);
    my_busy += __shfl_xor_sync(0xffffffffu, my_busy, off);
  }
  if ((threadIdx.x & 31) == 0) {
    red3[0][threadIdx.x >> 5] = my_max;
    red3[1][threadIdx.x >> 5] = my_work;
    red3[2][threadIdx.x >> 5] = my_busy;
  }
  __syncthreads();
  int64_t max64 = red3[0][0], work = red3[1][0], busy = red3[2][0];
#pragma unroll
  for (int w = 1; w < kPlanWarps; ++w) {
    max64 = red3[0][w] > max64 ? red3[0][w] : max64;
    work += red3[1][w];
    busy += red3[2][w];
  }
  const int32_t max_tiles = static_cast<int32_t>(max64);
  MLAV_PT(kPtReduced);
  const int32_t chunk = plan_chunk(work, max_tiles, busy, p.plan_blocks, [&](int32_t c) {
    int64_t big = 0;
    for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads)
      big += plan_big_blocks(tiles_of(i), rt_of(i), c, cap);
    return block_sum(big);
  });
  MLAV_PT(kPtChunk);

  auto bucket_of = [&](int32_t tiles, int32_t n) {
    const int32_t k = (kBuckets - 1) * ceil_div32(tiles, n) / chunk;
    return kBuckets - 1 - (k < kBuckets - 1 ? k : kBuckets - 1);
  };
  for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
    const int32_t tiles = tiles_of(i), rt = rt_of(i);
    const int32_t n = planned_splits(tiles, chunk, cap);
    args.plan[2 + i] = n;
    if (n > 0) atomicAdd(&count[bucket_of(tiles, n)], rt * n);
    if (!args.folded) atomicAdd(&count[kBuckets], rt);
  }
  __syncthreads();
  MLAV_PT(kPtCounted);
  if (threadIdx.x == 0) {
    int32_t at = 0;
    for (int b = 0; b <= kBuckets; ++b) cursor[b] = at, at += count[b];
    args.plan[0] = at;
    args.plan[1] = chunk;
  }
  __syncthreads();
  uint2* units = reinterpret_cast<uint2*>(args.plan + plan_units_word(bs));
  auto unit = [](int32_t i, int32_t r, int32_t s) {
    return make_uint2(static_cast<unsigned>(i),
                      static_cast<unsigned>(r) | (static_cast<unsigned>(s) << 16));
  };
  if (bs <= kPlanWarps) {
    // A few requests (long-ctx, the mixed batches of one long request): a warp per request, so a
    // request of 16 splits x 4 row tiles is not 64 stores by one thread (cuda/NOTES.md v24).
    const int32_t i = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    if (i < bs) {
      const int32_t tiles = tiles_of(i), rt = rt_of(i);
      const int32_t n = planned_splits(tiles, chunk, cap);
      int32_t at = 0, at_draft = 0;
      if (lane == 0) {
        if (n > 0) at = atomicAdd(&cursor[bucket_of(tiles, n)], rt * n);
        if (!args.folded) at_draft = atomicAdd(&cursor[kBuckets], rt);
      }
      at = __shfl_sync(0xffffffffu, at, 0);
      at_draft = __shfl_sync(0xffffffffu, at_draft, 0);
      for (int32_t k = lane; k < n * rt; k += 32) units[at + k] = unit(i, k % rt, k / rt);
      if (!args.folded)
        for (int32_t r = lane; r < rt; r += 32) units[at_draft + r] = unit(i, r, cap);
    }
  } else {
    // Many requests: a thread per request (a warp per request measured 2-3x slower at bs 32-64).
    for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
      const int32_t tiles = tiles_of(i), rt = rt_of(i);
      const int32_t n = planned_splits(tiles, chunk, cap);
      if (n > 0) {
        const int32_t at = atomicAdd(&cursor[bucket_of(tiles, n)], rt * n);
        for (int32_t s = 0; s < n; ++s)
          for (int32_t r = 0; r < rt; ++r) units[at + s * rt + r] = unit(i, r, s);
      }
      if (!args.folded) {
        const int32_t at = atomicAdd(&cursor[kBuckets], rt);
        for (int32_t r = 0; r < rt; ++r) units[at + r] = unit(i, r, cap);
      }
    }
  }
  MLAV_PT(kPtEnd);
}

void launch_plan(const PartialArgs& args, CUstream_st* stream) {
#ifdef MLAV_PLAN_TRACE
  static int calls = 0;
  if (++calls % 64 == 0) {
    const volatile unsigned long long* t = h_plan_trace;  // a planner that ran earlier
    if (t[kPtEnd] > t[kPtStart])
      std::printf("PLANTRACE bs %d: loaded %.2f reduced %.2f chunk %.2f counted %.2f end %.2f us\n",
                  args.p.batch_size, (t[1] - t[0]) * 1e-3, (t[2] - t[0]) * 1e-3, (t[3] - t[0]) * 1e-3,
                  (t[4] - t[0]) * 1e-3, (t[5] - t[0]) * 1e-3);
  }
#endif
  // In stream order after whatever the stream ran before (it reads the caller's metadata).
  CUDA_CHECK(launch_kernel(verify_plan, args, dim3(1), kPlanThreads, 0, stream, false));
}

}  // namespace mlaverify::cuda::detail

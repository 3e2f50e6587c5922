// The balanced split plan on the device (split_plan.h, issue 13): one block reads every request's
// lengths from the metadata buffers, picks the batch's chunk (plan_chunk, the same function the
// CPU backend runs serially), and writes each request's split count and the list of work units
// the partial kernel's blocks take. Nothing is read on the host, so a captured graph replays
// with new lengths correctly.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

namespace {
constexpr int kPlanThreads = 1024;
constexpr int kPlanWarps = kPlanThreads / 32;
// Unit order: prefix units by size, largest first (an approximate longest-first schedule: size
// s of chunk C goes to bucket kBuckets - 1 - min(kBuckets - 1, (kBuckets - 1) * s / C)), then
// the unfolded plan's draft units. Order affects only which block runs a unit, never its sums.
constexpr int kBuckets = 9;

// Sum (or max) over the block; every thread gets the result. Two barriers: one publishes the
// warps' values, the second keeps the next call from overwriting them before all have read.
template <bool kMax>
__device__ __forceinline__ int64_t block_reduce(int64_t v, int64_t* red) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) {
    const int64_t o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? (o > v ? o : v) : v + o;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  int64_t r = red[0];
#pragma unroll 4
  for (int w = 1; w < kPlanWarps; ++w) r = kMax ? (red[w] > r ? red[w] : r) : r + red[w];
  __syncthreads();
  return r;
}
}  // namespace

__global__ void __launch_bounds__(kPlanThreads, 1) verify_plan(const PartialArgs args) {
  // The partial kernel may launch now; it waits (griddepcontrol.wait) for this grid's writes.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const VerifyParams& p = args.p;
  const int32_t bs = p.batch_size, cap = p.num_splits;
  __shared__ int64_t red[kPlanWarps];
  __shared__ int32_t count[kBuckets + 1], cursor[kBuckets + 1];
  auto tiles_of = [&](int32_t i) {
    const RequestExtent e = request_extent(p, i);
    return plan_tiles(e.prefix_len, e.draft_nodes, args.folded);
  };
  auto row_tiles_of = [&](int32_t i) {
    return plan_row_tiles(p.qo_indptr[i + 1] - p.qo_indptr[i], p.num_heads);
  };
  int64_t my_max = 0;
  for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
    const int64_t t = tiles_of(i);
    my_max = t > my_max ? t : my_max;
  }
  const int64_t max_tiles = block_reduce<true>(my_max, red);
  const int64_t chunk = plan_chunk(max_tiles, p.plan_blocks, [&](int64_t c) {
    int64_t big = 0;
    for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads)
      big += plan_big_blocks(tiles_of(i), row_tiles_of(i), c, cap);
    return block_reduce<false>(big, red);
  });

  if (threadIdx.x <= kBuckets) count[threadIdx.x] = 0;
  __syncthreads();
  auto bucket_of = [&](int64_t tiles, int32_t n) {
    const int64_t size = ceil_div(tiles, n);
    const int64_t k = (kBuckets - 1) * size / chunk;
    return kBuckets - 1 - static_cast<int>(k < kBuckets - 1 ? k : kBuckets - 1);
  };
  for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
    const int64_t tiles = tiles_of(i);
    const int32_t n = planned_splits(tiles, chunk, cap);
    args.plan[2 + i] = n;
    const int32_t rt = static_cast<int32_t>(row_tiles_of(i));
    if (n > 0) atomicAdd(&count[bucket_of(tiles, n)], rt * n);
    if (!args.folded) atomicAdd(&count[kBuckets], rt);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t at = 0;
    for (int b = 0; b <= kBuckets; ++b) cursor[b] = at, at += count[b];
    args.plan[0] = at;
    args.plan[1] = static_cast<int32_t>(chunk);
  }
  __syncthreads();
  uint2* units = reinterpret_cast<uint2*>(args.plan + plan_units_word(bs));
  for (int32_t i = threadIdx.x; i < bs; i += kPlanThreads) {
    const int64_t tiles = tiles_of(i);
    const int32_t n = planned_splits(tiles, chunk, cap);
    const int32_t rt = static_cast<int32_t>(row_tiles_of(i));
    if (n > 0) {
      const int32_t at = atomicAdd(&cursor[bucket_of(tiles, n)], rt * n);
      for (int32_t s = 0; s < n; ++s)
        for (int32_t r = 0; r < rt; ++r)
          units[at + s * rt + r] = make_uint2(static_cast<unsigned>(i),
                                              static_cast<unsigned>(r) |
                                                  (static_cast<unsigned>(s) << 16));
    }
    if (!args.folded) {
      const int32_t at = atomicAdd(&cursor[kBuckets], rt);
      for (int32_t r = 0; r < rt; ++r)
        units[at + r] = make_uint2(static_cast<unsigned>(i),
                                   static_cast<unsigned>(r) | (static_cast<unsigned>(cap) << 16));
    }
  }
}

void launch_plan(const PartialArgs& args, CUstream_st* stream) {
  verify_plan<<<1, kPlanThreads, 0, stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

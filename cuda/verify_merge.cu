// The merge kernel's instantiation and launcher: one block per (token, head) row of the output.
// Kept in its own file so it compiles in parallel with the partial kernels.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

// ---------------------------------------------------------------------------------------------
// Merge kernel (split_plan.h numerics 4 and 5): one warp per (token, head) row of the output,
// 8 rows per block, 16 columns per lane (4 float4, each warp-wide access 512 contiguous bytes).
// grid.x = ceil(max_total_q * H / 8); rows past T = qo_indptr[bs] exit.
// It is latency-bound, not bandwidth-bound: the first version (one 128-thread block per row, a
// binary search over qo_indptr in global memory, then the lse loads, then the o loads, each
// waiting for the one before) took ~17 us of a ~20 us gap after the partial kernel on every
// docs/spec.md §8 workload (cuda/NOTES.md v14). Here qo_indptr is searched in shared memory, the
// lse of all partials are loaded by different lanes at once, and the o loads do not depend on each
// other.
// ---------------------------------------------------------------------------------------------
// The merge kernel's row: one warp, lane l holding the lse of partials l, l + 32, .. (-inf for
// the ones to skip) and summing columns 4 l + 128 c .. + 3, c = 0..3, of each partial, read by
// load_o(s, c) as a float4, one partial at a time (only those with lse > -inf are read).
constexpr int kLsePerLane = 3;  // partials l, l + 32, l + 64 (np <= kMaxSplits + 1 = 65)
static_assert(kMaxSplits + 1 <= 32 * kLsePerLane, "three partials per lane");
// The partials a row's merge visits, in order: v = 0 .. count - 1 visits partial at(v), i.e. the
// written splits 0 .. front - 1, then `last` (the draft block's partial) when count > front.
// Only these, not all np = cap + 1 with a skip for each unwritten one: under the balanced plan
// num_splits is only a cap (64 on tree16, whose rows hold 4 splits). The partials added, and
// their order, are the same, so the same bits; 46 of 70 timings faster over four rounds, tree16
// and chain4 under wgmma 1.8-3.7% in all four (cuda/NOTES.md v46).
struct MergeVisits {
  int32_t count, front, last;
  __device__ __forceinline__ int32_t at(int32_t v) const { return v < front ? v : last; }
};
template <class LoadO>
__device__ __forceinline__ void merge_row(const VerifyParams& p, int64_t token, int32_t head,
                                          const float (&lse_l)[kLsePerLane],
                                          MergeVisits visits, LoadO&& load_o) {
  const int lane = threadIdx.x & 31;
  float big_m = lse_l[0];
#pragma unroll
  for (int k = 1; k < kLsePerLane; ++k) big_m = fmaxf(big_m, lse_l[k]);
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1)
    big_m = fmaxf(big_m, __shfl_xor_sync(0xffffffffu, big_m, off));

  float4 o[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) o[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  float wsum = 0.f;
  if (big_m != -INFINITY) {  // warp-uniform: the shuffles below see every lane
#pragma unroll 4
    for (int32_t v = 0; v < visits.count; ++v) {
      const int32_t s = visits.at(v);
      float mine = lse_l[0];  // lse_l[s / 32], without indexing registers dynamically
#pragma unroll
      for (int k = 1; k < kLsePerLane; ++k)
        if (s >= 32 * k) mine = lse_l[k];
      const float lse_s = __shfl_sync(0xffffffffu, mine, s & 31);
      if (lse_s == -INFINITY) continue;
      const float w = merge_weight(lse_s, big_m);
#pragma unroll
      for (int c = 0; c < 4; ++c) merge_add(o[c], w, load_o(s, c));
      wsum += w;
    }
    merge_normalize(o, wsum);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) merge_store(p, token, head, lane * 4 + 128 * c, o[c]);
  if (lane == 0) merge_store_lse(p, token, head, big_m, wsum);
}

constexpr int kMergeThreads = 256;
constexpr int kMergeRows = kMergeThreads / 32;
constexpr int kMergeIndptrCache = 1024;  // qo_indptr entries searched in shared memory

// Four blocks per SM: the bound also lifts ptxas's default register cap for sm_120 (48 with
// the thread count alone, which spilled).
__global__ void __launch_bounds__(kMergeThreads, 4) verify_merge(const PartialArgs args) {
  const VerifyParams& p = args.p;
  const int32_t H = p.num_heads;
  const int32_t bs = p.batch_size;
  const int lane = threadIdx.x & 31;
  __shared__ int32_t qo[kMergeIndptrCache];
  const bool cached = bs + 1 <= kMergeIndptrCache;
  if (cached)
    for (int i = threadIdx.x; i <= bs; i += kMergeThreads) qo[i] = p.qo_indptr[i];
  __syncthreads();
  auto qo_at = [&](int32_t i) { return cached ? qo[i] : p.qo_indptr[i]; };

  const int64_t out_row = static_cast<int64_t>(blockIdx.x) * kMergeRows + (threadIdx.x >> 5);
  const int64_t token = out_row / H;
  const int32_t head = static_cast<int32_t>(out_row % H);
  if (token >= qo_at(bs)) return;
  // The request owning this token: the last i with qo_indptr[i] <= token (D_i >= 1, so unique).
  int32_t lo = 0, hi = bs - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (qo_at(mid) <= token)
      lo = mid;
    else
      hi = mid - 1;
  }
  const RequestExtent e = request_extent(p, lo);
  // Launched as a programmatic dependent of the partial kernel (launch_merge): everything above
  // reads only metadata, and ran while the partial kernel's last blocks finished; the
  // partials are read only once that grid has completed and its writes are visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int32_t np = args.folded ? p.num_splits : num_partials(p.num_splits);
  const int64_t rows_total = p.max_total_q * H;

  // Partials that hold data: the non-empty splits (by the same split_range or folded_range as
  // the partial kernel, which fill splits from the front, so no unwritten workspace is ever read)
  // and, unless folded, the draft block's; lse = -inf ones are skipped.
  // Balanced plan: the request's own split count, written by the planning kernel (which
  // completed before the partial kernel this merge waited for).
  const int32_t front =
      args.plan != nullptr ? plan_splits(args, lo)
      : args.folded        ? folded_nonempty_splits(e.prefix_len, e.draft_nodes, p.num_splits)
                           : nonempty_splits(e.prefix_len, p.num_splits);
  auto written = [&](int32_t s) { return s < front || (!args.folded && s == p.num_splits); };
  // Lane l holds the lse of partials l, l + 32, l + 64.
  float lse_l[kLsePerLane];
#pragma unroll
  for (int k = 0; k < kLsePerLane; ++k) {
    const int32_t s = lane + 32 * k;
    lse_l[k] = s < np && written(s) ? args.ws_lse[s * rows_total + out_row] : -INFINITY;
  }
  const MergeVisits visits{front + (args.folded ? 0 : 1), front, p.num_splits};
  merge_row(p, token, head, lse_l, visits, [&](int32_t s, int c) {
    return *reinterpret_cast<const float4*>(args.ws_o + (s * rows_total + out_row) * kLatentDim +
                                            lane * 4 + 128 * c);
  });
}

void launch_merge(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  // A programmatic dependent of the partial kernel: the merge's blocks may start once every block
  // of the partial kernel has started (the wgmma kernel says so at its top; the others never do,
  // so for them this launch is ordinary stream order), and they wait in griddepcontrol.wait for
  // its results.
  const dim3 grid(
      static_cast<unsigned>((p.max_total_q * p.num_heads + kMergeRows - 1) / kMergeRows));
  CUDA_CHECK(launch_kernel(verify_merge, args, grid, kMergeThreads, 0, stream, true));
}

}  // namespace mlaverify::cuda::detail

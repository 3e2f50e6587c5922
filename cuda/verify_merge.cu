// The merge kernel's instantiation and launcher: one block per (token, head) row of the output.
// Kept in its own file so it compiles in parallel with the partial kernels.
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.cuh"

namespace mlaverify::cuda::detail {

// ---------------------------------------------------------------------------------------------
// Merge kernel (split_plan.h numerics 4 and 5): one block of 128 threads per (token, head) row,
// 4 output columns per thread. grid.x = max_total_q * H; rows past T = qo_indptr[bs] exit.
// ---------------------------------------------------------------------------------------------
constexpr int kMergeThreads = 128;

__global__ void __launch_bounds__(kMergeThreads, 8) verify_merge(const PartialArgs args) {
  const VerifyParams& p = args.p;
  const int32_t H = p.num_heads;
  const int64_t out_row = blockIdx.x;
  const int64_t token = out_row / H;
  const int32_t head = static_cast<int32_t>(out_row % H);
  const int32_t bs = p.batch_size;
  if (token >= p.qo_indptr[bs]) return;
  // The request owning this token: the last i with qo_indptr[i] <= token (D_i >= 1, so unique).
  int32_t lo = 0, hi = bs - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (p.qo_indptr[mid] <= token)
      lo = mid;
    else
      hi = mid - 1;
  }
  const RequestExtent e = request_extent(p, lo);
  const int32_t np = num_partials(p.num_splits);
  const int64_t rows_total = p.max_total_q * H;

  // Partials that hold data: non-empty splits (same split_range as the partial kernel, so no
  // unwritten workspace is ever read) and the draft block; lse = -inf ones are skipped.
  float big_m = -INFINITY;
  for (int32_t s = 0; s < np; ++s) {
    if (s < p.num_splits && split_range(e.prefix_len, p.num_splits, s).empty()) continue;
    big_m = fmaxf(big_m, args.ws_lse[s * rows_total + out_row]);
  }
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  float wsum = 0.f;
  const int col = threadIdx.x * 4;
  if (big_m != -INFINITY) {
    for (int32_t s = 0; s < np; ++s) {
      if (s < p.num_splits && split_range(e.prefix_len, p.num_splits, s).empty()) continue;
      const float lse_s = args.ws_lse[s * rows_total + out_row];
      if (lse_s == -INFINITY) continue;
      // Each o_s is normalized by its own sum; w_s = exp(lse_s - M) restores its share of the
      // global sum, which is what makes the merge exact. lse_s <= M, so w_s <= 1: no overflow.
      const float w = expf(lse_s - big_m);
      const float4 v = *reinterpret_cast<const float4*>(
          args.ws_o + (s * rows_total + out_row) * kLatentDim + col);
      o.x += w * v.x;
      o.y += w * v.y;
      o.z += w * v.z;
      o.w += w * v.w;
      wsum += w;
    }
    const float inv = 1.f / wsum;  // wsum >= 1: the partial at the max has w = 1
    o.x *= inv;
    o.y *= inv;
    o.z *= inv;
    o.w *= inv;
  }
  const int64_t o_off = token * p.o_token_stride + head * p.o_head_stride + col;
  if (p.o_dtype == DType::BF16) {
    __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.o_lat) + o_off;
    // Round once, to nearest even (split_plan.h numerics 5), and store 4 columns as 8 bytes.
    auto bits = [](float v) {
      return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
    };
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(bits(o.x) | (bits(o.y) << 16), bits(o.z) | (bits(o.w) << 16));
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(p.o_lat) + o_off) = o;
  }
  if (threadIdx.x == 0)
    p.lse[token * H + head] = big_m == -INFINITY ? -INFINITY : big_m + logf(wsum);
}

void launch_merge(const PartialArgs& args, CUstream_st* stream) {
  const VerifyParams& p = args.p;
  dim3 grid(static_cast<unsigned>(p.max_total_q * p.num_heads));
  verify_merge<<<grid, kMergeThreads, 0, stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mlaverify::cuda::detail

// A timing prototype of the sm_120 redesign (cuda/NOTES.md v18c): one 64-row verify tile split
// over the 2 CTAs of a cluster, each owning half of S's 576 columns (CTA r: latent columns
// r*256 .. r*256+255 and k_pe columns r*32 .. r*32+31) and the matching half of O's 512
// (its latent columns, which are also its V). Q's half lives in registers as mma A fragments, O's
// half in registers (64 per lane), each key tile crosses L2 once per cluster (36 KB per CTA,
// padded rows, a ring of 2 tiles), and the 64 x 64 fp32 partial scores cross to the peer through
// distributed shared memory once per tile; both CTAs run the same online softmax on the same
// sums, so their P is the same. No masks, splits or drafts: the main loop alone, to measure
// cycles per tile against today's kernel (v16e: 10.4K cycles per 64-row tile per SM).
//
// --check: one cluster on a small problem against a double-precision reference (a prototype's
// sanity check: the timed code computes attention, not noise).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 64, kKeys = 64;
constexpr int kRowDim = 576, kLatent = 512;
constexpr int kHalfCols = 288;                  // S columns per CTA
constexpr int kRowBytes = kHalfCols * 2 + 16;   // 592: padded, so 8 rows hit 8 bank groups
constexpr int kTileBytes = kKeys * kRowBytes;   // 37,888
constexpr int kXBytes = kThreads * 16 * 4;      // 16 KB: each thread's 16 partial scores
constexpr int kSmem = 2 * kTileBytes + kXBytes + 5 * kRows * 4;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void ldsm_x4(uint32_t a, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                        uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t a, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                          uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ int swz(int row, int unit) { return (unit & ~7) | ((unit ^ row) & 7); }

// CTA-local column c (0 .. 287) of half r in the 576-wide row.
__host__ __device__ __forceinline__ int full_col(int r, int c) {
  return c < 256 ? r * 256 + c : kLatent + r * 32 + (c - 256);
}

// Each cluster: q rows [64 * cluster, +64) of q ([rows, 576] bf16), keys idx[0 .. tiles * 64)
// of pool ([slots, 576] bf16), o ([rows, 512] fp32, normalized), cycles per tile per CTA.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    cluster_tile(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ pool,
                 const int64_t* __restrict__ idx, int tiles, float scale_log2, float* o,
                 long long* cycles, int exchange) {
  extern __shared__ __align__(128) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int r = static_cast<int>(cluster.block_rank());
  const int64_t row_base = static_cast<int64_t>(blockIdx.x / 2) * kRows;
  unsigned char* tile_s = smem;                        // [2][64][592 B]
  float* x_s = reinterpret_cast<float*>(smem + 2 * kTileBytes);  // [256][16]; P aliases it
  float* red_max = x_s + kThreads * 16;                // [2][64]
  float* red_sum = red_max + 2 * kRows;                // [2][64]
  float* row_scale = red_sum + 2 * kRows;              // [64]
  float* x_peer = cluster.map_shared_rank(x_s, r ^ 1);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(x_s);  // [64][64] bf16, swizzled

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rg = warp >> 1, half = warp & 1;      // S: 16 rows x 32 keys
  const int rp = warp >> 2, quarter = warp & 3;   // PV: 32 rows x 64 of this CTA's 256 columns
  const int frag_row = lane >> 2, frag_col = (lane & 3) * 2;
  const int mi = lane >> 3, mr = lane & 7;

  // Q's half as A fragments: 18 k16 steps x 4 registers.
  uint32_t qa[18][4];
  {
    const __nv_bfloat16* q0 = q + (row_base + rg * 16 + frag_row) * kRowDim;
    const __nv_bfloat16* q1 = q0 + 8 * kRowDim;
    auto ld = [&](const __nv_bfloat16* row, int c) {
      return *reinterpret_cast<const uint32_t*>(row + full_col(r, c));
    };
#pragma unroll
    for (int ks = 0; ks < 18; ++ks) {
      qa[ks][0] = ld(q0, ks * 16 + frag_col);
      qa[ks][1] = ld(q1, ks * 16 + frag_col);
      qa[ks][2] = ld(q0, ks * 16 + frag_col + 8);
      qa[ks][3] = ld(q1, ks * 16 + frag_col + 8);
    }
  }
  // Loader: key tid / 4, units (tid % 4) + 4 j, j < 9.
  const int ld_key = tid >> 2, ld_u0 = tid & 3;
  auto issue = [&](int t) {
    if (t >= tiles) return;
    const __nv_bfloat16* row = pool + idx[static_cast<int64_t>(t) * kKeys + ld_key] * kRowDim;
    const uint32_t dst = smem_u32(tile_s + (t & 1) * kTileBytes + ld_key * kRowBytes);
#pragma unroll
    for (int j = 0; j < 9; ++j) {
      const int u = ld_u0 + 4 * j;
      cp_async16(dst + u * 16, row + full_col(r, u * 8));
    }
  };
  float acc[2][8][4];
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int b = 0; b < 8; ++b)
#pragma unroll
      for (int f = 0; f < 4; ++f) acc[a][b][f] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  cluster.sync();  // the peer runs before its shared memory is written
  issue(0);
  asm volatile("cp.async.commit_group;\n" ::);
  const long long t0 = clock64();
  for (int t = 0; t < tiles; ++t) {
    // Tile t is in; tile t + 1 goes to the other buffer (free: every warp's PV of t - 1 is done).
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    issue(t + 1);
    asm volatile("cp.async.commit_group;\n" ::);
    const uint32_t tb = smem_u32(tile_s + (t & 1) * kTileBytes);

    // ---- S partial: 16 rows x 32 keys over this CTA's 288 columns ----
    float s[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) s[n][f] = 0.f;
    const uint32_t kb = tb + (half * 32 + (mi >> 1) * 8 + mr) * kRowBytes + (mi & 1) * 16;
#pragma unroll
    for (int ks = 0; ks < 18; ++ks) {
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(kb + pair * 16 * kRowBytes + ks * 32, b0, b1, b2, b3);
        mma(s[pair * 2], qa[ks], b0, b1);
        mma(s[pair * 2 + 1], qa[ks], b2, b3);
      }
    }
    // ---- exchange: the peer's partial for the same fragments, through DSMEM ----
    // (exchange 0: none, the sums are wrong; 2: through this CTA's own shared memory with two
    // block barriers, what the exchange would cost without the cluster: timing variants.)
    if (exchange == 1) {
      cluster.sync();  // B: the peer has read (and used as P) the buffer this write reuses
      float4* dst = reinterpret_cast<float4*>(x_peer + tid * 16);
#pragma unroll
      for (int n = 0; n < 4; ++n) dst[n] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
      cluster.sync();  // A: the peer's partial is here
    } else if (exchange == 2) {
      __syncthreads();
      float4* dst = reinterpret_cast<float4*>(x_s + tid * 16);
#pragma unroll
      for (int n = 0; n < 4; ++n) dst[n] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
      __syncthreads();
    }
    if (exchange != 0) {
      const float4* src = reinterpret_cast<const float4*>(x_s + tid * 16);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const float4 v = src[n];
        // a + b == b + a: both CTAs hold the same sums.
        s[n][0] = r == 0 ? s[n][0] + v.x : v.x + s[n][0];
        s[n][1] = r == 0 ? s[n][1] + v.y : v.y + s[n][1];
        s[n][2] = r == 0 ? s[n][2] + v.z : v.z + s[n][2];
        s[n][3] = r == 0 ? s[n][3] + v.w : v.w + s[n][3];
      }
    }
    // ---- online softmax (log2 units), the row max and sum across the two key halves ----
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        s[n][f] *= scale_log2;
        tmax[f >> 1] = fmaxf(tmax[f >> 1], s[n][f]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
      if ((lane & 3) == 0) red_max[half * kRows + rg * 16 + frag_row + 8 * h] = tmax[h];
    }
    __syncthreads();  // also: every thread has read x_s, so P may overwrite it
    float m_new[2], sc[2], psum[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rg * 16 + frag_row + 8 * h;
      m_new[h] = fmaxf(m_run[h], fmaxf(red_max[row], red_max[kRows + row]));
      sc[h] = exp2f(m_run[h] - m_new[h]);
      if (half == 0 && (lane & 3) == 0) row_scale[row] = sc[h];  // for the PV layout
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float p0 = exp2f(s[n][2 * h] - m_new[h]), p1 = exp2f(s[n][2 * h + 1] - m_new[h]);
        psum[h] += p0 + p1;
        const int row = rg * 16 + frag_row + 8 * h, key = half * 32 + n * 8 + frag_col;
        *reinterpret_cast<__nv_bfloat162*>(p_s + row * kKeys + swz(row, key >> 3) * 8 +
                                           frag_col) = __floats2bfloat162_rn(p0, p1);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      psum[h] += __shfl_xor_sync(0xffffffffu, psum[h], 1);
      psum[h] += __shfl_xor_sync(0xffffffffu, psum[h], 2);
      if ((lane & 3) == 0) red_sum[half * kRows + rg * 16 + frag_row + 8 * h] = psum[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rg * 16 + frag_row + 8 * h;
      l_run[h] = l_run[h] * sc[h] + red_sum[row] + red_sum[kRows + row];
      m_run[h] = m_new[h];
    }
    // PV rows rp * 32 + mt * 16 + frag_row (+ 8): O rescaled by the factors the S layout wrote.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float f = row_scale[rp * 32 + mt * 16 + frag_row + 8 * h];
#pragma unroll
        for (int n = 0; n < 8; ++n) acc[mt][n][2 * h] *= f, acc[mt][n][2 * h + 1] *= f;
      }
    // ---- O += P V over this CTA's 256 columns ----
    uint32_t pa[2][4][4];
    const uint32_t pb = smem_u32(p_s) + (rp * 32 + (lane & 15)) * kKeys * 2;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldsm_x4(pb + mt * 16 * kKeys * 2 + (((ks * 2 + (lane >> 4)) ^ mr) * 16), pa[mt][ks][0],
                pa[mt][ks][1], pa[mt][ks][2], pa[mt][ks][3]);
    const uint32_t vb = tb + ((mi & 1) * 8 + mr) * kRowBytes + (quarter * 8 + (mi >> 1)) * 16;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int pair = 0; pair < 4; ++pair) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(vb + ks * 16 * kRowBytes + pair * 32, b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma(acc[mt][pair * 2], pa[mt][ks], b0, b1);
          mma(acc[mt][pair * 2 + 1], pa[mt][ks], b2, b3);
        }
      }
  }
  const long long t1 = clock64();
  cluster.sync();
  if (tid == 0) cycles[blockIdx.x] = (t1 - t0) / tiles;
  if (o == nullptr) return;
  // Epilogue: 1 / l from the S layout to the PV layout through red_sum.
  if (half == 0 && (lane & 3) == 0)
    for (int h = 0; h < 2; ++h) red_sum[rg * 16 + frag_row + 8 * h] = 1.f / l_run[h];
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rp * 32 + mt * 16 + frag_row + 8 * h;
      const float inv = red_sum[row];
      float* out = o + (row_base + row) * kLatent + r * 256 + quarter * 64;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        out[n * 8 + frag_col] = acc[mt][n][2 * h] * inv;
        out[n * 8 + frag_col + 1] = acc[mt][n][2 * h + 1] * inv;
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc > 1 && std::string(argv[1]) == "--check";
  // --exchange N (timing variants, wrong sums): 0 none, 2 through own shared memory; 1 (default)
  // the real DSMEM exchange.
  int exchange = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--exchange") exchange = std::atoi(argv[i + 1]);
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  CUDA_CHECK(cudaFuncSetAttribute(cluster_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const int clusters = check ? 1 : prop.multiProcessorCount / 2;
  const int tiles = check ? 3 : 128;  // tree32: 128 key tiles per block
  const int64_t rows = int64_t{clusters} * kRows, keys = int64_t{tiles} * kKeys;
  const int64_t slots = keys * clusters + 7;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<__nv_bfloat16> hq(rows * kRowDim), hp(slots * kRowDim);
  for (auto& x : hq) x = __float2bfloat16(u(rng));
  for (auto& x : hp) x = __float2bfloat16(u(rng));
  std::vector<int64_t> hidx(keys);  // every cluster the same keys (they are L2-resident anyway)
  std::vector<int64_t> perm(slots - 1);
  std::iota(perm.begin(), perm.end(), 1);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::copy(perm.begin(), perm.begin() + keys, hidx.begin());
  __nv_bfloat16 *dq, *dp;
  int64_t* di;
  float* dout;
  long long* dc;
  CUDA_CHECK(cudaMalloc(&dq, hq.size() * 2));
  CUDA_CHECK(cudaMalloc(&dp, hp.size() * 2));
  CUDA_CHECK(cudaMalloc(&di, hidx.size() * 8));
  CUDA_CHECK(cudaMalloc(&dout, rows * kLatent * 4));
  CUDA_CHECK(cudaMalloc(&dc, 2 * clusters * sizeof(long long)));
  CUDA_CHECK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dp, hp.data(), hp.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(di, hidx.data(), hidx.size() * 8, cudaMemcpyHostToDevice));
  const float sm_scale = 0.1352338f, scale_log2 = sm_scale * 1.4426950408889634f;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int rep = 0; rep < (check ? 1 : 11); ++rep) {
    CUDA_CHECK(cudaEventRecord(e0));
    cluster_tile<<<2 * clusters, kThreads, kSmem>>>(dq, dp, di, tiles, scale_log2, dout, dc,
                                                    exchange);
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaGetLastError());
    float t;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  std::vector<long long> c(2 * clusters);
  CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * 8, cudaMemcpyDeviceToHost));
  std::sort(c.begin(), c.end());
  std::printf("cluster_tile_probe: %s, %d clusters x 2 CTAs, %d key tiles of 64 per cluster, "
              "%d bytes of shared memory per CTA\n", prop.name, clusters, tiles, kSmem);
  // Two SMs spend these cycles on one 64-row tile: 2x per tile in today's units (one SM, one
  // tile: 10.4K cycles, v16e).
  std::printf("  exchange %d: cycles per tile per CTA: median %lld (%lld .. %lld); kernel %.1f us "
              "(median of %zu); %.0f SM-cycles per 64-row tile against today's 10.4K (v16e)\n",
              exchange, c[c.size() / 2], c.front(), c.back(), ms[ms.size() / 2] * 1e3, ms.size(),
              2.0 * c[c.size() / 2]);
  if (check) {
    std::vector<float> ho(rows * kLatent);
    CUDA_CHECK(cudaMemcpy(ho.data(), dout, ho.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0, big = 0;
    for (int64_t i = 0; i < rows; ++i) {
      std::vector<double> sc(keys);
      double mx = -1e300;
      for (int64_t k = 0; k < keys; ++k) {
        double d = 0;
        for (int col = 0; col < kRowDim; ++col)
          d += double(__bfloat162float(hq[i * kRowDim + col])) *
               double(__bfloat162float(hp[hidx[k] * kRowDim + col]));
        sc[k] = d * sm_scale;
        mx = std::max(mx, sc[k]);
      }
      double l = 0;
      for (auto& x : sc) l += (x = std::exp(x - mx));
      for (int col = 0; col < kLatent; ++col) {
        double ref = 0;
        for (int64_t k = 0; k < keys; ++k)
          ref += sc[k] * double(__bfloat162float(hp[hidx[k] * kRowDim + col]));
        ref /= l;
        worst = std::max(worst, std::fabs(ref - ho[i * kLatent + col]));
        big = std::max(big, std::fabs(ref));
      }
    }
    // P is rounded to bf16 (8 bits): a relative error of a few 2^-9 of the output's scale.
    const bool ok = worst <= 0.02 * big;
    std::printf("  check: worst |o - ref| %.3g, max |ref| %.3g: %s\n", worst, big,
                ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
  }
  return 0;
}

// GPU benchmark of the verify kernel over the docs/spec.md §8 workloads, with the device's two
// ceilings (device-to-device copy bandwidth, mma.sync bf16 peak) measured in the same run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/timing.h"
#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/split_plan.h"
#include "mlaverify/verify_params.h"

using namespace mlaverify;

#ifdef MLAV_HAVE_WGMMA_PEAK
namespace mlaverify::bench {
void wgmma_ceilings(int sms, double* s_like, double* pv_like);  // wgmma_peak.cu (sm_90a)
void wgmma_one_warpgroup(int sms, double* s_ss, double* s_rs, double* pv);
}
#endif

namespace {

// ---- ceilings --------------------------------------------------------------------------------

using bench::median_ms;

// Device-to-device copy of a buffer far larger than L2; bytes counted read + written.
double copy_bandwidth_gbs() {
  const size_t bytes = size_t{2} << 30;
  void *a, *b;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMemset(a, 0x3c, bytes));
  const float ms = median_ms(2, 10, [&](int) {
    CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  });
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

// L2 -> shared-memory gather ceiling: the partial kernels' KV load pattern alone. One CTA per SM
// (a kernel-sized shared-memory request), kLoaders threads; keys are random slots of a pool that
// fits in L2 (as every row tile after the first reads its request's KV there), copied with 16-byte
// cp.async.cg into the 128-byte-swizzled tile layout, 9 runs of 128 bytes per key (576 bf16);
// kDepth 64-key tiles in flight. Bytes landed per second. kPattern 0: 8 threads copy one 128-byte
// run, one copy each. kPattern 1 and 2 are the mma.sync kernels' loaders (cuda/NOTES.md v32): a
// key's 4 threads copy two units each, 2t and 2t + 1 (1: each warp-wide copy takes half of every
// sector it touches, the next copy the other half) or t and t + 4 (2: whole sectors).
template <int kLoaders, int kDepth, int kPattern = 0>
__global__ void __launch_bounds__(kLoaders, 1)
    gather_kernel(const __nv_bfloat16* pool, const int32_t* slots, int tiles) {
  extern __shared__ __align__(1024) unsigned char ring[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  constexpr int kPerKey = kPattern == 0 ? 8 : 4;  // threads per key
  const int t = threadIdx.x % kPerKey, key0 = threadIdx.x / kPerKey;
  constexpr int kKeysPerPass = kLoaders / kPerKey;
  const int u0 = kPattern == 1 ? 2 * t : t;     // first unit
  constexpr int kNext = kPattern == 1 ? 1 : 4;  // second unit - first (kPattern 1, 2)
  for (int it = 0; it < tiles; ++it) {
    const uint32_t buf = base + (it % kDepth) * 64 * 1152;
    const int32_t* s = slots + (static_cast<int64_t>(blockIdx.x) * tiles + it) * 64;
    for (int key = key0; key < 64; key += kKeysPerPass) {
      const __nv_bfloat16* src = pool + static_cast<int64_t>(s[key]) * 576 + u0 * 8;
      const uint32_t dst = buf + key * 128 + ((u0 ^ (key & 7)) * 16);
#pragma unroll
      for (int c = 0; c < 9; ++c) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + c * 8192),
                     "l"(src + c * 64));
        if constexpr (kPattern != 0) {
          const uint32_t dst2 = buf + key * 128 + (((u0 + kNext) ^ (key & 7)) * 16);
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst2 + c * 8192),
                       "l"(src + c * 64 + kNext * 8));
        }
      }
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kDepth - 1));
  }
  asm volatile("cp.async.wait_group 0;\n" ::);
}

template <int kLoaders, int kDepth, int kPattern = 0>
double gather_gbs(int sms, const __nv_bfloat16* pool, const int32_t* slots, int tiles) {
  const int smem = 227 * 1024;  // one CTA per SM, whatever the ring needs
  static_assert(kDepth * 64 * 1152 <= 227 * 1024, "ring fits");
  constexpr auto kernel = gather_kernel<kLoaders, kDepth, kPattern>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const float ms = median_ms(2, 5, [&](int) {
    kernel<<<sms, kLoaders, smem>>>(pool, slots, tiles);
    CUDA_CHECK(cudaGetLastError());
  });
  return double(sms) * tiles * 64 * 1152 / (ms * 1e-3) / 1e9;
}

// The gather ceiling for a pool of 16,384 slots (18.9 MB, inside the 60 MB L2).
void print_gather_ceilings(int sms) {
  const int slots_n = 16384, tiles = 128;
  __nv_bfloat16* pool;
  CUDA_CHECK(cudaMalloc(&pool, size_t{slots_n} * 576 * 2));
  CUDA_CHECK(cudaMemset(pool, 0, size_t{slots_n} * 576 * 2));
  std::vector<int32_t> h(static_cast<size_t>(sms) * tiles * 64);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& v : h) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<int32_t>(x % slots_n);
  }
  int32_t* slots;
  CUDA_CHECK(cudaMalloc(&slots, h.size() * 4));
  CUDA_CHECK(cudaMemcpy(slots, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  std::printf("gather ceiling (L2-resident pool, 1 CTA/SM, GB/s into smem): 128 threads depth 1/2/3 "
              "%.0f / %.0f / %.0f, 256 threads depth 2 %.0f\n",
              gather_gbs<128, 1>(sms, pool, slots, tiles), gather_gbs<128, 2>(sms, pool, slots, tiles),
              gather_gbs<128, 3>(sms, pool, slots, tiles), gather_gbs<256, 2>(sms, pool, slots, tiles));
  std::printf(
      "gather ceiling, the mma.sync loaders' pattern, 256 threads depth 2 (GB/s): units 2t, "
      "2t + 1 (two copies per sector) %.0f, units t, t + 4 (whole sectors) %.0f\n",
      gather_gbs<256, 2, 1>(sms, pool, slots, tiles),
      gather_gbs<256, 2, 2>(sms, pool, slots, tiles));
  CUDA_CHECK(cudaFree(pool));
  CUDA_CHECK(cudaFree(slots));
}

// Register-only mma.sync loop: 8 independent accumulator chains per warp, random non-zero bf16
// operands (zeros run faster on some parts), so the tensor cores are the only limit.
__global__ void mma_peak_kernel(float* sink, int iters, uint32_t seed) {
  uint32_t h = (blockIdx.x * blockDim.x + threadIdx.x) * 2654435761u ^ seed;
  auto rnd = [&h]() {
    h ^= h << 13, h ^= h >> 17, h ^= h << 5;
    // two bf16 in [1, 2): exponent 127, random 7-bit mantissas
    return 0x3f803f80u | (h & 0x007f007fu);
  };
  uint32_t a[4] = {rnd(), rnd(), rnd(), rnd()}, b0 = rnd(), b1 = rnd();
  float acc[8][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (s == 1234.5f) sink[0] = s;  // keeps the loop alive; never true for these operands
}

double mma_peak_tflops(int sms) {
  float* sink;
  CUDA_CHECK(cudaMalloc(&sink, 4));
  const int blocks = sms * 4, threads = 256, iters = 4096;
  const float ms = median_ms(2, 5, [&](int i) {
    mma_peak_kernel<<<blocks, threads>>>(sink, iters, 12345u + i);
    CUDA_CHECK(cudaGetLastError());
  });
  CUDA_CHECK(cudaFree(sink));
  const double flops = double(blocks) * (threads / 32) * iters * 8 * (2.0 * 16 * 8 * 16);
  return flops / (ms * 1e-3) / 1e12;
}

// ---- workloads -------------------------------------------------------------------------------

struct Workload {
  const char* name;
  int bs, heads, draft;
  int64_t prefix;
  bool chain;
  double triton_us, torch_us, roofline_us;  // docs/spec.md §8 / the issue, H200; 0: not known
  // Mixed prefix lengths (issue 13): request i's prefix is mixed(i); `prefix` is then the
  // longest, the length the split plan is chosen from (one count for all requests).
  int64_t (*mixed)(int i) = nullptr;
};

int64_t prefix_of(const Workload& w, int i) { return w.mixed ? w.mixed(i) : w.prefix; }
int64_t total_prefix(const Workload& w) {
  int64_t n = 0;
  for (int i = 0; i < w.bs; ++i) n += prefix_of(w, i);
  return n;
}

const Workload kWorkloads[] = {
    {"k2-tp8-tree16", 16, 8, 16, 8192, false, 1281, 562, 57},
    {"v3-tp8-tree32", 8, 16, 32, 16384, false, 2542, 1329, 229},
    {"v3-tp8-chain4", 32, 16, 4, 4096, true, 2629, 459, 37},
    {"k2-tp8-ddtree128", 4, 8, 128, 8192, false, 1297, 715, 116},
    {"v3-tp1-tree8", 4, 128, 8, 4096, false, 2508, 363, 57},
    {"long-ctx", 2, 16, 16, 65536, false, 10153, 891, 114},
};

// Mixed-length batches (issue 13; the same lengths in the peer benchmark's copy of bench.py,
// bench/results/2026-12-01-v16f-*): one long request beside a short one (the issue's example),
// 64 requests of 100..4000 tokens (100 + 61 i mod 3901), and P = 0 and 1 beside 4097.
const Workload kMixed[] = {
    {"mix-long-short", 2, 128, 16, 30000, false, 0, 0, 0,
     [](int i) -> int64_t { return i == 0 ? 30000 : 200; }},
    {"mix-64x100-4000", 64, 16, 8, 4000, false, 0, 0, 0,
     [](int i) -> int64_t { return 100 + (int64_t{i} * 61) % 3901; }},
    {"mix-p0-p1-p4097", 3, 16, 16, 4097, false, 0, 0, 0,
     [](int i) -> int64_t { return i == 0 ? 0 : i == 1 ? 1 : 4097; }},
};

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12, h *= 0x297a2d39u, h ^= h >> 15;
    p[i] = __float2bfloat16((static_cast<float>(h) * 0x1.0p-32f - 0.5f) * 0.5f);  // [-0.25, 0.25)
  }
}

struct Result {
  double us, kv_gbs, tflops, roof_frac;
  int splits;
};

template <class T>
T* upload(const std::vector<T>& v) {
  T* d;
  CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// The partial kernel VerifyKernel chose and, for wgmma, its draft plan (printed per row).
std::string g_variant = "?";
// The balanced split plan's resident blocks (VerifyParams::plan_blocks; 0: the uniform plan,
// MLAV_BENCH_PLAN=uniform) and what the device planned for the last workload timed.
int g_plan_blocks = 0;
std::string g_plan_note;
// --fragmentation: the prefix slots' run length (1: fully scattered, the default everywhere
// else) and the mean runs per request of the last workload timed.
int64_t g_run_len = 1;
double g_runs_per_request = 0;
// --plan-cost: time the balanced plan's planning kernel alone (R of them in one graph).
bool g_plan_only = false;
// MLAV_BENCH_PLAN=once: the balanced plan, planned once before the timed graph, whose rotations
// each enqueue VerifyKernel::attend() (the layers of one forward pass, which share the plan).
bool g_plan_once = false;

// Times one workload at one split count: R rotations over distinct KV (> L2 in total), all
// captured in one CUDA graph; median of graph replays divided by R.
double time_workload(const Workload& w, int splits, int sms, double* kv_bytes_out,
                     double* flops_out, double* io_bytes_out) {
  const int64_t sumP = total_prefix(w);
  const int D = w.draft, H = w.heads, bs = w.bs;
  const double batch_kv_bytes = std::max(1.0, double(sumP) * kRowDim * 2);
  const int R = std::min(64, std::max(2, static_cast<int>(std::ceil(4 * 60e6 / batch_kv_bytes))));
  const int64_t T = int64_t{bs} * D;
  // Each request's prefix is ceil(P_i / L) runs of L consecutive slots (L = g_run_len; 1: every
  // slot on its own, fully scattered), the runs at random places in the pool: blocks of L slots
  // shuffled, each rotation its own blocks. L = 1 is a random permutation of single slots.
  const int64_t L = std::max<int64_t>(1, g_run_len);
  int64_t blocks_per_rotation = 0;
  for (int i = 0; i < bs; ++i) blocks_per_rotation += (prefix_of(w, i) + L - 1) / L;
  const int64_t slots = int64_t{R} * blocks_per_rotation * L + 1;  // slot 0: the sink

  __nv_bfloat16 *pool, *q, *kext, *o;
  float *lse, *ws;
  CUDA_CHECK(cudaMalloc(&pool, slots * kRowDim * 2));
  CUDA_CHECK(cudaMalloc(&q, R * T * H * kRowDim * 2));
  CUDA_CHECK(cudaMalloc(&kext, R * T * kRowDim * 2));
  CUDA_CHECK(cudaMalloc(&o, R * T * H * kLatentDim * 2));
  CUDA_CHECK(cudaMalloc(&lse, R * T * H * 4));
  fill_bf16<<<1024, 256>>>(pool, slots * kRowDim, 1);
  fill_bf16<<<1024, 256>>>(q, R * T * H * kRowDim, 2);
  fill_bf16<<<1024, 256>>>(kext, R * T * kRowDim, 3);
  CUDA_CHECK(cudaGetLastError());

  // Prefix slots (docs/spec.md §8: scattered by a random permutation when L = 1).
  std::mt19937_64 rng(7);
  std::vector<int64_t> block_order(static_cast<size_t>(R * blocks_per_rotation));
  std::iota(block_order.begin(), block_order.end(), 0);
  std::shuffle(block_order.begin(), block_order.end(), rng);
  std::vector<int32_t> qo(bs + 1), kv(bs + 1);
  std::vector<int64_t> mask_indptr(bs + 1);
  kv[0] = 0, mask_indptr[0] = 0;
  for (int i = 0; i <= bs; ++i) qo[i] = i * D;
  for (int i = 0; i < bs; ++i) {
    kv[i + 1] = kv[i] + static_cast<int32_t>(prefix_of(w, i));
    mask_indptr[i + 1] = mask_indptr[i] + int64_t{D} * (prefix_of(w, i) + D);
  }
  // FULL_MASK as SGLang builds it: prefix columns ones, the draft block from the tree.
  std::vector<uint8_t> mask(static_cast<size_t>(mask_indptr[bs]), 1);
  for (int i = 0; i < bs; ++i) {
    std::vector<int32_t> parent(D);
    parent[0] = -1;
    for (int t = 1; t < D; ++t) parent[t] = w.chain ? t - 1 : static_cast<int32_t>(rng() % t);
    for (int t = 0; t < D; ++t) {
      const int64_t P = prefix_of(w, i);
      uint8_t* row = mask.data() + mask_indptr[i] + int64_t{t} * (P + D) + P;
      std::fill(row, row + D, 0);
      for (int a = t; a >= 0; a = parent[a]) row[a] = 1;
    }
  }
  int32_t* d_qo = upload(qo);
  int32_t* d_kv = upload(kv);
  int64_t* d_mi = upload(mask_indptr);
  uint8_t* d_mask = upload(mask);
  std::vector<int64_t*> d_idx(R);
  int64_t next_block = 0, runs = 0;
  for (int r = 0; r < R; ++r) {
    std::vector<int64_t> idx;
    idx.reserve(static_cast<size_t>(sumP));
    for (int i = 0; i < bs; ++i) {
      const int64_t P = prefix_of(w, i);
      for (int64_t k = 0; k < P; ++k) {
        if (k % L == 0) ++next_block;
        const int64_t slot = 1 + block_order[static_cast<size_t>(next_block - 1)] * L + k % L;
        if (k == 0 || slot != idx.back() + 1) ++runs;  // runs as model::measure counts them
        idx.push_back(slot);
      }
    }
    d_idx[r] = upload(idx);
  }
  g_runs_per_request = double(runs) / (double(R) * bs);

  VerifyParams p;
  p.batch_size = bs;
  p.num_heads = H;
  p.max_draft = D;
  p.max_total_q = T;
  p.num_splits = splits;
  p.plan_blocks = g_plan_blocks;
  p.sm_scale = 0.1352338f;
  p.q_token_stride = int64_t{H} * kRowDim;
  p.q_head_stride = kRowDim;
  p.kv_layout = KvLayout::latent_first();
  p.pool_slots = slots;
  p.qo_indptr = d_qo;
  p.kv_indptr = d_kv;
  p.kv_indices_len = sumP;
  p.draft_source = DraftKvSource::ExtendRows;
  p.mask_format = MaskFormat::FullMask;
  p.mask = d_mask;
  p.mask_len = static_cast<int64_t>(mask.size());
  p.mask_indptr = d_mi;
  p.o_token_stride = int64_t{H} * kLatentDim;
  p.o_head_stride = kLatentDim;
  p.kv_pool = pool;
  const size_t ws_bytes = cuda::VerifyKernel::workspace_bytes(p);
  CUDA_CHECK(cudaMalloc(&ws, ws_bytes));

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cuda::VerifyKernel> kernels(R);
  for (int r = 0; r < R; ++r) {
    VerifyParams pr = p;
    pr.q = q + int64_t{r} * T * H * kRowDim;
    pr.k_extend = kext + int64_t{r} * T * kRowDim;
    pr.kv_indices = d_idx[r];
    pr.o_lat = o + int64_t{r} * T * H * kLatentDim;
    pr.lse = lse + int64_t{r} * T * H;
    kernels[r].initialize(pr, ws, stream);
  }
  g_variant = kernels[0].variant_name();
  if (g_variant == "wgmma") g_variant += kernels[0].folded() ? "/folded" : "/unfolded";
  if (g_variant == "wgmma/folded")
    g_variant += kernels[0].cluster_merge() ? "/cluster-merge" : "/merge-kernel";
  if (g_variant == "mma.sync x2" && kernels[0].mma2_ring() == 3) g_variant += "/ring3";
  if (g_variant == "mma.sync x2" && kernels[0].mma2_ring() == 4) g_variant += "/ring4";
  if (g_variant == "mma.sync x2" && kernels[0].mma2_ring() == cuda::kMma2RingWs) g_variant += "/ws";
  if (g_variant.rfind("mma.sync x2", 0) == 0 && kernels[0].mma2_l1() > 0)
    g_variant += "/L1+" + std::to_string(kernels[0].mma2_l1());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const bool attend_only = g_plan_once && !g_plan_only && p.plan_blocks > 0;
  if (attend_only) {  // the rotations share the lengths, so the one plan serves them all
    kernels[0].plan();
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < R; ++r) {
    if (attend_only) {
      kernels[r].attend();
    } else if (g_plan_only && p.plan_blocks > 0) {
      cuda::detail::PartialArgs a;
      a.p = p;
      a.p.kv_indices = d_idx[r];
      a.folded = kernels[r].folded();
      a.plan = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(ws) +
                                          cuda::VerifyKernel::plan_offset(p));
      cuda::detail::launch_plan(a, stream);
    } else {
      kernels[r].run();
    }
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const float ms = median_ms(3, 20, [&](int) { CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, stream);
  // A NaN or Inf in the output would mean the timed code is not the tested code path.
  std::vector<uint16_t> probe(std::min<int64_t>(T * H * kLatentDim, 4096));
  CUDA_CHECK(cudaMemcpy(probe.data(), o, probe.size() * 2, cudaMemcpyDeviceToHost));
  for (uint16_t b : probe)
    if ((b & 0x7f80) == 0x7f80) std::printf("WARNING: non-finite output in %s\n", w.name);
  g_plan_note.clear();
  if (p.plan_blocks > 0) {  // what the planning kernel wrote (the last rotation's, all alike)
    std::vector<int32_t> head(2 + bs);
    CUDA_CHECK(cudaMemcpy(head.data(),
                          reinterpret_cast<char*>(ws) + cuda::VerifyKernel::plan_offset(p),
                          head.size() * 4, cudaMemcpyDeviceToHost));
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < bs; ++i) lo = std::min(lo, head[2 + i]), hi = std::max(hi, head[2 + i]);
    g_plan_note = " plan: " + std::to_string(head[0]) + " units, chunk " +
                  std::to_string(head[1]) + " tiles, splits " + std::to_string(lo) + ".." +
                  std::to_string(hi);
  }

  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (auto* d : d_idx) CUDA_CHECK(cudaFree(d));
  for (void* d : {static_cast<void*>(pool), static_cast<void*>(q), static_cast<void*>(kext),
                  static_cast<void*>(o), static_cast<void*>(lse), static_cast<void*>(ws),
                  static_cast<void*>(d_qo), static_cast<void*>(d_kv), static_cast<void*>(d_mi),
                  static_cast<void*>(d_mask)})
    CUDA_CHECK(cudaFree(d));

  *kv_bytes_out = double(sumP) * kRowDim * 2;
  *flops_out = 2.0 * (kRowDim + kLatentDim) * H * D * (double(sumP) + double(bs) * D);
  *io_bytes_out = *kv_bytes_out + double(T) * H * (kRowDim * 2 + kLatentDim * 2 + 4);
  (void)sms;
  return ms * 1e3 / R;  // microseconds per verify call
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0, sms = 0;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  sms = prop.multiProcessorCount;
  // --sweep: also time splits 1..64 per workload; --only NAME: one workload (for ncu).
  // --fragmentation: kernel time against the prefix slots' runs per request (issue 14), for
  // k2-tp8-tree16 and v3-tp8-chain4 (or --only NAME).
  bool sweep = false, fragmentation = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--sweep") sweep = true;
    if (std::string(argv[i]) == "--fragmentation") fragmentation = true;
    if (std::string(argv[i]) == "--plan-cost") g_plan_only = true;
    if (std::string(argv[i]) == "--only" && i + 1 < argc) only = argv[++i];
  }
  const char* kernel_env = std::getenv("MLAV_CUDA_KERNEL");
  std::printf("device: %s, %d SMs, L2 %d MB, cc %d.%d, MLAV_CUDA_KERNEL=%s\n", prop.name, sms,
              prop.l2CacheSize >> 20, prop.major, prop.minor,
              kernel_env ? kernel_env : "(default)");
  const char* l1_env = std::getenv("MLAV_MMA2_L1");
  const char* carve_env = std::getenv("MLAV_SMEM_CARVEOUT");
  const char* ring_env = std::getenv("MLAV_MMA2_RING");
  std::printf("MLAV_MMA2_RING=%s MLAV_MMA2_L1=%s MLAV_SMEM_CARVEOUT=%s\n",
              ring_env ? ring_env : "(default)", l1_env ? l1_env : "(default)",
              carve_env ? carve_env : "(default)");

  // The split plan: one wave of the partial kernel's blocks on MLAV_BENCH_SMS SMs (default: this
  // device's; 188 plans as the RTX PRO 6000 would, run here on this device's SMs) at the
  // kernel's residency.
  const int resident = cuda::partial_blocks_per_sm(kernel_env);
  const char* plan_env = std::getenv("MLAV_BENCH_SMS");
  const int plan_sms = plan_env && std::atoi(plan_env) > 0 ? std::atoi(plan_env) : sms;
  std::printf("split plan for %d SMs x %d resident blocks of the partial kernel\n", plan_sms,
              resident);
  // MLAV_BENCH_RUN_LEN=L: every workload's prefix slots in runs of L consecutive slots (a paged
  // pool of page size L, aligned with the key tiles when L is a multiple of 64) instead of a
  // random permutation of single slots (docs/spec.md §8's layout, the default).
  if (const char* run_env = std::getenv("MLAV_BENCH_RUN_LEN")) {
    char* end = nullptr;
    const long long l = std::strtoll(run_env, &end, 10);
    if (end == run_env || *end != '\0' || l < 1 || l > (1ll << 30)) {
      std::fprintf(stderr, "MLAV_BENCH_RUN_LEN=%s: expected a run length in 1 .. 2^30\n", run_env);
      return 2;
    }
    g_run_len = l;
  }
  std::printf("prefix slots in runs of %lld\n", static_cast<long long>(g_run_len));
  // MLAV_BENCH_PLAN: balanced (default; splits by each request's real length, planned on the
  // device; the splits column is then the cap num_splits) or uniform (every request alike).
  // once: balanced, with the plan enqueued once before each workload's timed graph, whose
  // calls are VerifyKernel::attend() alone: the per-layer cost when one plan serves every layer
  // of a forward pass (--plan-cost times the plan itself).
  const char* plan_mode = std::getenv("MLAV_BENCH_PLAN");
  const std::string plan_name = plan_mode && *plan_mode ? plan_mode : "balanced";
  if (plan_name != "balanced" && plan_name != "uniform" && plan_name != "once") {
    std::fprintf(stderr, "MLAV_BENCH_PLAN=%s: expected balanced, uniform or once\n", plan_mode);
    return 2;
  }
  const bool balanced = plan_name != "uniform";
  g_plan_once = plan_name == "once";
  g_plan_blocks = balanced ? plan_sms * resident : 0;
  std::printf("MLAV_BENCH_PLAN=%s (plan_blocks %d)\n", plan_name.c_str(), g_plan_blocks);
  auto splits_for = [&](const Workload& w) {
    return balanced ? cuda::balanced_split_cap(w.heads, w.draft, w.prefix, g_plan_blocks)
                    : cuda::suggest_num_splits(w.bs, w.heads, w.draft, w.prefix, plan_sms,
                                               resident);
  };

  // The six docs/spec.md §8 workloads, then the mixed-length ones (issue 13).
  std::vector<const Workload*> all;
  for (const Workload& w : kWorkloads) all.push_back(&w);
  for (const Workload& w : kMixed) all.push_back(&w);

  if (g_plan_only) {
    // The planning kernel alone, R per graph back to back, at each workload's cap: its launch
    // and run (with R = 2 for the SPEC workloads the graph's own launch is part of the figure).
    for (const Workload* wp : all) {
      double kvb, fl, iob;
      const double us = time_workload(*wp, splits_for(*wp), sms, &kvb, &fl, &iob);
      std::printf("plan-cost %-17s %7.2f us per planning kernel\n", wp->name, us);
    }
    return 0;
  }
  if (fragmentation) {
    // Runs per request from 1 (each request one ascending run) to P (every slot on its own), at
    // the split the plan picks; each point the median of graph replays over R rotations.
    std::printf("\n%-17s %6s %10s %12s %9s %9s %10s  %s\n", "workload", "splits", "run len",
                "runs/request", "us", "vs 1 run", "KV GB/s", "kernel");
    for (const Workload* wp : all) {
      const Workload& w = *wp;
      if (only.empty() ? std::string(w.name) != "k2-tp8-tree16" &&
                             std::string(w.name) != "v3-tp8-chain4"
                       : only != w.name)
        continue;
      const int splits = splits_for(w);
      double base = 0;
      for (int64_t runs : {int64_t{1}, int64_t{4}, int64_t{16}, int64_t{64}, int64_t{256},
                           int64_t{1024}, w.prefix / 2, w.prefix}) {
        g_run_len = (w.prefix + runs - 1) / runs;
        double kvb, fl, iob;
        const double us = time_workload(w, splits, sms, &kvb, &fl, &iob);
        if (base == 0) base = us;
        std::printf("%-17s %6d %10lld %12.1f %9.1f %8.3fx %10.0f  %s\n", w.name, splits,
                    static_cast<long long>(g_run_len), g_runs_per_request, us, us / base,
                    kvb / (us * 1e-6) / 1e9, (g_variant + g_plan_note).c_str());
      }
    }
    return 0;
  }
  if (!only.empty()) {
    for (const Workload* wp : all)
      if (const Workload& w = *wp; only == w.name) {
        double kvb, fl, iob;
        const int suggested = splits_for(w);
        std::vector<int> tries = {suggested};
        if (sweep)
          for (int s : {1, 2, 3, 4, 8})
            if (s != suggested) tries.push_back(s);
        for (int s : tries)
          std::printf("%s splits %d: %.1f us%s\n", w.name, s,
                      time_workload(w, s, sms, &kvb, &fl, &iob), g_plan_note.c_str());
      }
    return 0;
  }
  print_gather_ceilings(sms);
#ifdef MLAV_HAVE_WGMMA_PEAK
  if (prop.major == 9 && prop.minor == 0) {
    double s_like = 0, pv_like = 0;
    bench::wgmma_ceilings(sms, &s_like, &pv_like);
    std::printf("wgmma ceilings (2 warpgroups/SM, operands in smem): m64n64k16 K-major %.0f TFLOP/s, "
                "m64n256k16 N-major B %.0f TFLOP/s\n", s_like, pv_like);
    double s_ss = 0, s_rs = 0, pv1 = 0;
    bench::wgmma_one_warpgroup(sms, &s_ss, &s_rs, &pv1);
    std::printf("wgmma, 1 warpgroup/SM: m64n64k16 SS %.0f, RS (A in registers) %.0f, m64n256k16 "
                "%.0f TFLOP/s\n", s_ss, s_rs, pv1);
    // What the cluster merge's rule (cuda/verify_kernel.h choose_cluster_merge) sees.
    cuda::detail::prepare_partial_wgmma();
    std::printf("wgmma kernel clusters resident at once (size 1 / 2 / 4 / 8): %d / %d / %d / %d\n",
                cuda::detail::max_active_clusters_wgmma(1),
                cuda::detail::max_active_clusters_wgmma(2),
                cuda::detail::max_active_clusters_wgmma(4),
                cuda::detail::max_active_clusters_wgmma(8));
  }
#endif
  const double copy_gbs = copy_bandwidth_gbs();
  const double mma_tflops = mma_peak_tflops(sms);
  std::printf(
      "ceilings (measured now): copy %.0f GB/s (read + write), mma.sync bf16 %.0f TFLOP/s\n",
      copy_gbs, mma_tflops);
  std::printf("\n%-17s %6s %8s %8s %8s %7s %7s %9s %9s %7s  %s\n", "workload", "splits", "us",
              "KV GB/s", "TFLOP/s", "roof us", "frac", "vs triton", "vs torch", "issue", "kernel");
  for (const Workload* wp : all) {
    const Workload& w = *wp;
    const int suggested = splits_for(w);
    std::vector<int> tries = {suggested};
    if (sweep)
      for (int s : {1, 2, 4, 8, 16, 32, 64})
        if (s != suggested) tries.push_back(s);
    double best_us = 1e30, kvb = 0, fl = 0, iob = 0;
    int best_s = suggested;
    for (int s : tries) {
      const double us = time_workload(w, s, sms, &kvb, &fl, &iob);
      if (sweep) std::printf("  %-15s splits %2d: %.1f us\n", w.name, s, us);
      if (us < best_us) best_us = us, best_s = s;
    }
    // Roofline from the ceilings measured above (bytes: prefix KV once, queries and outputs).
    const double roof_us = std::max(iob / (copy_gbs * 1e9), fl / (mma_tflops * 1e12)) * 1e6;
    std::printf("%-17s %6d %8.1f %8.0f %8.1f %7.1f %6.0f%% %8.1fx %8.1fx %7.0f  %s\n", w.name,
                best_s, best_us, kvb / (best_us * 1e-6) / 1e9, fl / (best_us * 1e-6) / 1e12,
                roof_us, 100.0 * roof_us / best_us, w.triton_us / best_us, w.torch_us / best_us,
                w.roofline_us, (g_variant + g_plan_note).c_str());
  }
  return 0;
}

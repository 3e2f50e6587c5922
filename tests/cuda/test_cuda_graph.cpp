// The kernel's own lifecycle on device pointers, captured once in a CUDA graph and replayed with
// new batch contents (trees, prefix lengths, real batch sizes, graph padding): right every time.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/split_plan.h"
#include "model/batch.h"
#include "tests/cuda/test_util.h"

namespace mlaverify::cuda::testing {
namespace {

using model::BatchSpec;
using model::VerifyBatch;

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Captured sizes: what SGLang fixes per captured graph (batch size, heads, max draft, splits),
// and capacities for everything else.
constexpr int32_t kBs = 6;
constexpr int32_t kHeads = 8;
constexpr int32_t kMaxDraft = 24;
constexpr int64_t kMaxTotalQ = int64_t{kBs} * kMaxDraft;
constexpr int32_t kSplits = 3;

// Batches of different real sizes, trees and prefix lengths, all padded to the captured kBs;
// plan_blocks > 0: under the balanced split plan (split_plan.h; planned on the device from each
// replay's lengths), one request of each batch long (up to 5,000 tokens).
std::vector<BatchSpec> replay_specs(int32_t plan_blocks = 0) {
  std::vector<BatchSpec> v;
  Rng rng(99);
  const int32_t real_sizes[] = {6, 2, 5, 1, 4};
  for (int32_t n = 0; n < 5; ++n) {
    BatchSpec s;
    for (int32_t i = 0; i < real_sizes[n]; ++i) {
      const int32_t d = 1 + rng.below(kMaxDraft);
      int64_t p = rng.below(3) == 0 ? rng.below(3) : rng.below(700);  // P = 0, 1, 2 often
      if (plan_blocks > 0 && i == n % real_sizes[n]) p = 1000 + rng.below(4000);
      s.requests.push_back({random_tree(d, rng), p});
    }
    s.num_heads = kHeads;
    s.num_splits = kSplits;
    s.plan_blocks = plan_blocks;
    s.graph_padded_bs = kBs;
    s.value_scale = 0.25;
    s.seed = 1000 + n;
    v.push_back(s);
  }
  return v;
}

// The eager backend on the same batch (its own grid from the batch's own maxima) is the
// reference for a replay's outputs: identical per-block arithmetic, so identical bits (lse and o)
// for every real row. `where` names the replay in a failure.
void expect_eager_bits(CudaBackend& eager, VerifyBatch& b, const std::vector<uint16_t>& o_bits,
                       const std::vector<float>& lse, const std::string& where) {
  b.poison_outputs();
  eager.run(b.params());
  const size_t real = static_cast<size_t>(b.real_tokens()) * kHeads;
  ASSERT_GE(lse.size(), real) << where;
  ASSERT_GE(o_bits.size(), real * kLatentDim) << where;
  for (size_t r = 0; r < real; ++r) {
    ASSERT_EQ(0, std::memcmp(&lse[r], &b.lse()[r], 4)) << where << " row " << r;
    for (int k = 0; k < kLatentDim; ++k)
      ASSERT_EQ(o_bits[r * kLatentDim + k], b.o_lat()[r * kLatentDim + k].bits)
          << where << " row " << r << " column " << k;
  }
}

class CudaGraph : public ::testing::TestWithParam<int32_t> {};

TEST_P(CudaGraph, CaptureOnceReplayWithNewContents) {
  MLAV_SKIP_WITHOUT_DEVICE();
  std::vector<VerifyBatch> batches;
  for (const BatchSpec& s : replay_specs(GetParam())) batches.push_back(VerifyBatch::build(s));
  int64_t pool_cap = 0, idx_cap = 0, mask_cap = 0, slots_cap = 0;
  for (VerifyBatch& b : batches) {
    VerifyParams p = b.params();
    ASSERT_EQ(p.batch_size, kBs);
    ASSERT_LE(p.max_total_q, kMaxTotalQ);
    pool_cap = std::max(pool_cap, b.pool().storage_elements());
    slots_cap = std::max(slots_cap, p.pool_slots);
    idx_cap = std::max<int64_t>(idx_cap, static_cast<int64_t>(b.metadata().kv_indices.size()));
    mask_cap = std::max(mask_cap, p.mask_len);
  }
  // Device buffers at their captured capacities.
  DevBuf q(kMaxTotalQ * kHeads * kRowDim * 2), pool(pool_cap * 2), qo((kBs + 1) * 4),
      kv((kBs + 1) * 4), idx(std::max<int64_t>(idx_cap, 1) * 8), kext(kMaxTotalQ * kRowDim * 2),
      mask(mask_cap), mask_indptr((kBs + 1) * 8), o(kMaxTotalQ * kHeads * kLatentDim * 2),
      lse(kMaxTotalQ * kHeads * 4);

  VerifyParams d = batches[0].params();  // strides, layout, formats: the same for every batch
  d.batch_size = kBs;
  d.max_draft = kMaxDraft;
  d.max_total_q = kMaxTotalQ;
  d.num_splits = kSplits;
  d.plan_blocks = GetParam();
  d.q = q.p;
  d.kv_pool = pool.p;
  d.pool_slots = slots_cap;
  d.qo_indptr = static_cast<const int32_t*>(qo.p);
  d.kv_indptr = static_cast<const int32_t*>(kv.p);
  d.kv_indices = static_cast<const int64_t*>(idx.p);
  d.kv_indices_len = idx_cap;
  d.k_extend = kext.p;
  d.mask = mask.p;
  d.mask_len = mask_cap;
  d.mask_indptr = static_cast<const int64_t*>(mask_indptr.p);
  d.o_lat = o.p;
  d.lse = static_cast<float*>(lse.p);
  ASSERT_TRUE(VerifyKernel::can_implement(d)) << VerifyKernel::can_implement(d).reason;
  DevBuf ws(VerifyKernel::workspace_bytes(d));
  // A workspace full of garbage, as a server's reused buffer is (CudaBackend does the same).
  CUDA_CHECK(cudaMemset(ws.p, kWorkspacePoison, VerifyKernel::workspace_bytes(d)));

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  VerifyKernel kernel;
  kernel.initialize(d, ws.p, stream);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernel.run();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  CudaBackend eager;
  auto replay = [&](VerifyBatch& b, std::vector<uint16_t>& o_bits, std::vector<float>& lse_out) {
    const VerifyParams p = b.params();
    const int64_t T = b.total_tokens();
    auto up = [&](void* dst, const void* src, size_t bytes) {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    };
    up(q.p, p.q, T * kHeads * kRowDim * 2);
    up(pool.p, p.kv_pool, b.pool().storage_elements() * 2);
    up(qo.p, p.qo_indptr, (kBs + 1) * 4);
    up(kv.p, p.kv_indptr, (kBs + 1) * 4);
    if (!b.metadata().kv_indices.empty())
      up(idx.p, p.kv_indices, b.metadata().kv_indices.size() * 8);
    up(kext.p, p.k_extend, T * kRowDim * 2);
    up(mask.p, p.mask, p.mask_len);
    up(mask_indptr.p, p.mask_indptr, (kBs + 1) * 8);
    // Stale outputs from the last replay are overwritten with NaN: every real row must be written.
    CUDA_CHECK(cudaMemsetAsync(o.p, 0xff, kMaxTotalQ * kHeads * kLatentDim * 2, stream));
    CUDA_CHECK(cudaMemsetAsync(lse.p, 0xff, kMaxTotalQ * kHeads * 4, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    o_bits.resize(T * kHeads * kLatentDim);
    lse_out.resize(T * kHeads);
    CUDA_CHECK(
        cudaMemcpyAsync(o_bits.data(), o.p, o_bits.size() * 2, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(
        cudaMemcpyAsync(lse_out.data(), lse.p, lse_out.size() * 4, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  };

  std::vector<std::vector<uint16_t>> first_bits;
  for (size_t n = 0; n < batches.size(); ++n) {
    VerifyBatch& b = batches[n];
    std::vector<uint16_t> bits;
    std::vector<float> lse_g;
    replay(b, bits, lse_g);
    ASSERT_NO_FATAL_FAILURE(expect_eager_bits(eager, b, bits, lse_g, "batch " + std::to_string(n)));
    // Balanced plan: what the planning kernel wrote is split_plan.h's function of this batch's
    // lengths, as the CPU backend computes it on the host (the chunk and every n_i).
    if (GetParam() > 0) {
      const VerifyParams hp = b.params();
      std::vector<int32_t> head(2 + kBs);
      CUDA_CHECK(cudaMemcpy(head.data(), static_cast<char*>(ws.p) + VerifyKernel::plan_offset(d),
                            head.size() * 4, cudaMemcpyDeviceToHost));
      auto tiles_of = [&](int32_t i) {
        const RequestExtent e = request_extent(hp, i);
        return plan_tiles(e.prefix_len, e.draft_nodes, kernel.folded());
      };
      auto rt_of = [&](int32_t i) {
        return plan_row_tiles(hp.qo_indptr[i + 1] - hp.qo_indptr[i], kHeads);
      };
      const int32_t chunk = plan_chunk_serial(kBs, kSplits, GetParam(), tiles_of, rt_of);
      EXPECT_EQ(head[1], chunk) << "batch " << n;
      for (int32_t i = 0; i < kBs; ++i)
        EXPECT_EQ(head[2 + i], planned_splits(tiles_of(i), chunk, kSplits))
            << "batch " << n << " request " << i;
    }
    // Padded rows were written too and hold no NaN (slot 0 is finite).
    for (size_t k = 0; k < bits.size(); ++k)
      ASSERT_FALSE(std::isnan(bf16_to_float(bf16{bits[k]}))) << "batch " << n << " element " << k;
    first_bits.push_back(bits);
  }
  // Replaying an earlier batch after others gives its first result again: no state leaks
  // between replays through the workspace.
  std::vector<uint16_t> again;
  std::vector<float> lse_again;
  replay(batches[0], again, lse_again);
  EXPECT_EQ(again, first_bits[0]);

  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// One plan per forward pass, used by every layer (VerifyKernel::plan() then attend() per layer):
// the layers share the batch's lengths and the workspace, and each has its own Q, KV pool, slots
// and outputs. One graph (the plan, then three layers' attend()) is replayed for two forward
// passes of different lengths; every layer's result must be the eager backend's bits for that
// layer's batch. Kills a plan() that does nothing (the layers read the poisoned workspace) and an
// attend() that drops the plan (the uniform plan's splits: other bits), both run on the device
// (cuda/NOTES.md v44; bench/results/2026-12-07-v44/mutants.sh builds them).
TEST(CudaGraphLayers, PlanOncePerForwardAttendPerLayer) {
  MLAV_SKIP_WITHOUT_DEVICE();
  constexpr int kLayers = 3;
  constexpr int32_t kPlanBlocks = 10;
  const std::vector<BatchSpec> passes = {replay_specs(kPlanBlocks)[0],
                                         replay_specs(kPlanBlocks)[2]};
  // batches[pass][layer]: the pass's requests, the layer's own values and slots (seed).
  std::vector<std::vector<VerifyBatch>> batches(passes.size());
  int64_t pool_cap = 0, idx_cap = 0, mask_cap = 0, slots_cap = 0;
  for (size_t n = 0; n < passes.size(); ++n)
    for (int l = 0; l < kLayers; ++l) {
      BatchSpec s = passes[n];
      s.seed = 7000 + 10 * n + l;
      batches[n].push_back(VerifyBatch::build(s));
      VerifyBatch& b = batches[n].back();
      const VerifyParams p = b.params();
      ASSERT_EQ(p.batch_size, kBs);
      pool_cap = std::max(pool_cap, b.pool().storage_elements());
      slots_cap = std::max(slots_cap, p.pool_slots);
      idx_cap = std::max<int64_t>(idx_cap, static_cast<int64_t>(b.metadata().kv_indices.size()));
      mask_cap = std::max(mask_cap, p.mask_len);
    }
  // The shared metadata of a pass: qo_indptr and kv_indptr are the same in all its layers.
  for (const auto& pass : batches)
    for (const VerifyBatch& b : pass) {
      EXPECT_EQ(b.metadata().qo_indptr, pass[0].metadata().qo_indptr);
      EXPECT_EQ(b.metadata().kv_indptr, pass[0].metadata().kv_indptr);
    }
  struct Layer {
    DevBuf q{kMaxTotalQ * kHeads * kRowDim * 2}, pool, idx, kext{kMaxTotalQ * kRowDim * 2},
        mask, o{kMaxTotalQ * kHeads * kLatentDim * 2}, lse{kMaxTotalQ * kHeads * 4};
    Layer(int64_t pool_elems, int64_t idx_n, int64_t mask_n)
        : pool(pool_elems * 2), idx(std::max<int64_t>(idx_n, 1) * 8), mask(mask_n) {}
    // The pass's params with this layer's own buffers.
    VerifyParams bind(VerifyParams p) const {
      p.q = q.p;
      p.kv_pool = pool.p;
      p.kv_indices = static_cast<const int64_t*>(idx.p);
      p.k_extend = kext.p;
      p.mask = mask.p;
      p.o_lat = o.p;
      p.lse = static_cast<float*>(lse.p);
      return p;
    }
  };
  std::vector<std::unique_ptr<Layer>> layers;
  for (int l = 0; l < kLayers; ++l)
    layers.push_back(std::make_unique<Layer>(pool_cap, idx_cap, mask_cap));
  DevBuf qo((kBs + 1) * 4), kv((kBs + 1) * 4), mask_indptr((kBs + 1) * 8);

  VerifyParams d = batches[0][0].params();
  d.batch_size = kBs;
  d.max_draft = kMaxDraft;
  d.max_total_q = kMaxTotalQ;
  d.num_splits = kSplits;
  d.plan_blocks = kPlanBlocks;
  d.pool_slots = slots_cap;
  d.qo_indptr = static_cast<const int32_t*>(qo.p);
  d.kv_indptr = static_cast<const int32_t*>(kv.p);
  d.kv_indices_len = idx_cap;
  d.mask_len = mask_cap;
  d.mask_indptr = static_cast<const int64_t*>(mask_indptr.p);
  d = layers[0]->bind(d);  // for the workspace's size and the static checks
  ASSERT_TRUE(VerifyKernel::can_implement(d)) << VerifyKernel::can_implement(d).reason;
  const size_t ws_bytes = VerifyKernel::workspace_bytes(d);
  DevBuf ws(ws_bytes);
  CUDA_CHECK(cudaMemset(ws.p, kWorkspacePoison, ws_bytes));

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<VerifyKernel> kernels(kLayers);
  for (int l = 0; l < kLayers; ++l) kernels[l].initialize(layers[l]->bind(d), ws.p, stream);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels[0].plan();
  for (int l = 0; l < kLayers; ++l) kernels[l].attend();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  CudaBackend eager;
  for (size_t n = 0; n < batches.size(); ++n) {
    auto up = [&](void* dst, const void* src, size_t bytes) {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    };
    const VerifyParams p0 = batches[n][0].params();
    up(qo.p, p0.qo_indptr, (kBs + 1) * 4);
    up(kv.p, p0.kv_indptr, (kBs + 1) * 4);
    up(mask_indptr.p, p0.mask_indptr, (kBs + 1) * 8);
    for (int l = 0; l < kLayers; ++l) {
      VerifyBatch& b = batches[n][l];
      const VerifyParams p = b.params();
      const int64_t T = b.total_tokens();
      Layer& g = *layers[l];
      up(g.q.p, p.q, T * kHeads * kRowDim * 2);
      up(g.pool.p, p.kv_pool, b.pool().storage_elements() * 2);
      if (!b.metadata().kv_indices.empty())
        up(g.idx.p, p.kv_indices, b.metadata().kv_indices.size() * 8);
      up(g.kext.p, p.k_extend, T * kRowDim * 2);
      up(g.mask.p, p.mask, p.mask_len);
      CUDA_CHECK(cudaMemsetAsync(g.o.p, 0xff, kMaxTotalQ * kHeads * kLatentDim * 2, stream));
      CUDA_CHECK(cudaMemsetAsync(g.lse.p, 0xff, kMaxTotalQ * kHeads * 4, stream));
    }
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int l = 0; l < kLayers; ++l) {
      VerifyBatch& b = batches[n][l];
      const size_t real = static_cast<size_t>(b.real_tokens()) * kHeads;
      std::vector<uint16_t> bits(real * kLatentDim);
      std::vector<float> lse_g(real);
      CUDA_CHECK(cudaMemcpy(bits.data(), layers[l]->o.p, bits.size() * 2, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(lse_g.data(), layers[l]->lse.p, real * 4, cudaMemcpyDeviceToHost));
      ASSERT_NO_FATAL_FAILURE(expect_eager_bits(
          eager, b, bits, lse_g, "pass " + std::to_string(n) + " layer " + std::to_string(l)));
    }
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// The uniform plan, and the balanced plan for 10 resident blocks (few, so a long request
// splits up to the cap of kSplits while the short ones keep one split).
INSTANTIATE_TEST_SUITE_P(Plans, CudaGraph, ::testing::Values(0, 10),
                         [](const ::testing::TestParamInfo<int32_t>& i) {
                           return i.param == 0 ? std::string("uniform") : std::string("balanced");
                         });

}  // namespace
}  // namespace mlaverify::cuda::testing

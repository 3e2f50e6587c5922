// Host-side rejections of CudaBackend (every InvalidInput names its field and index) and the
// kernel's static support checks. None needs a device: these run in CI too.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/verify_kernel.h"
#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "model/batch.h"
#include "model/validate.h"
#include "tests/support/expect_invalid.h"
#include "tests/cuda/test_util.h"

namespace mlaverify::cuda::testing {
namespace {

using model::BatchSpec;
using model::DraftTree;
using model::VerifyBatch;

VerifyBatch small_batch(MaskFormat format = MaskFormat::FullMask,
                        DraftKvSource source = DraftKvSource::ExtendRows,
                        IndptrConvention conv = IndptrConvention::Csr) {
  BatchSpec s;
  s.requests = {{DraftTree::from_parents({-1, 0, 0, 1}), 5}, {DraftTree::chain(3), 0}};
  s.num_heads = 2;
  s.mask_format = format;
  s.draft_source = source;
  s.mask_indptr_convention = conv;
  s.mask_word_bytes = 1;
  s.seed = 1;
  return VerifyBatch::build(s);
}

// The backend rejects p naming (field, index); the model's validator rejects it too (cuda/ keeps
// its own host checks because it may not depend on model/, so the two must not drift apart).
void expect_invalid(const VerifyParams& p, const std::string& field, int64_t index) {
  CudaBackend gpu;
  try {
    gpu.run(p);
    ADD_FAILURE() << "accepted; expected InvalidInput on " << field << "[" << index << "]";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_EQ(e.index(), index) << e.what();
  }
  EXPECT_THROW(model::validate_params(p), InvalidInput)
      << "model accepts what cuda rejects: " << field;
}

TEST(CudaValidation, ValidBatchPassesHostChecks) {
  for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking,
                       MaskFormat::FlashInferPacked, MaskFormat::DraftBits}) {
    VerifyBatch b = small_batch(f);
    CudaBackend gpu;
    // Valid metadata is never InvalidInput; without a device it is Unsupported, with one it runs.
    try {
      gpu.run(b.params());
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaValidation, StaticSizes) {
  VerifyBatch b = small_batch();
  auto with = [&](const std::function<void(VerifyParams&)>& f) {
    VerifyParams p = b.params();
    f(p);
    return p;
  };
  expect_invalid(with([](VerifyParams& p) { p.batch_size = 0; }), "batch_size", -1);
  expect_invalid(with([](VerifyParams& p) { p.num_heads = 129; }), "num_heads", -1);
  expect_invalid(with([](VerifyParams& p) { p.max_draft = 0; }), "max_draft", -1);
  expect_invalid(with([](VerifyParams& p) { p.max_draft = 1025; }), "max_draft", -1);
  expect_invalid(with([](VerifyParams& p) { p.num_splits = 65; }), "num_splits", -1);
  expect_invalid(with([](VerifyParams& p) { p.max_total_q = 0; }), "max_total_q", -1);
  expect_invalid(with([](VerifyParams& p) { p.sm_scale = std::nanf(""); }), "sm_scale", -1);
  expect_invalid(with([](VerifyParams& p) { p.sm_scale = 0.f; }), "sm_scale", -1);
  expect_invalid(with([](VerifyParams& p) { p.mask_format = static_cast<MaskFormat>(9); }),
                 "mask_format", -1);
}

TEST(CudaValidation, NullPointers) {
  VerifyBatch b = small_batch();
  VerifyParams p = b.params();
  VerifyParams q = p;
  q.q = nullptr;
  expect_invalid(q, "q", -1);
  q = p, q.kv_pool = nullptr;
  expect_invalid(q, "kv_pool", -1);
  q = p, q.qo_indptr = nullptr;
  expect_invalid(q, "qo_indptr", -1);
  q = p, q.kv_indptr = nullptr;
  expect_invalid(q, "kv_indptr", -1);
  q = p, q.o_lat = nullptr;
  expect_invalid(q, "o_lat", -1);
  q = p, q.lse = nullptr;
  expect_invalid(q, "lse", -1);
  q = p, q.mask = nullptr;
  expect_invalid(q, "mask", -1);
  q = p, q.k_extend = nullptr;
  expect_invalid(q, "k_extend", -1);
  q = p, q.mask_indptr = nullptr;
  expect_invalid(q, "mask_indptr", -1);
}

TEST(CudaValidation, StridesAndOffsets) {
  VerifyBatch b = small_batch();
  VerifyParams p = b.params();
  VerifyParams q = p;
  q.pool_slots = 0;
  expect_invalid(q, "pool_slots", -1);
  q = p, q.q_latent_offset = 72;  // latent [72, 584) runs past the 576-element head stride
  expect_invalid(q, "q_latent_offset", -1);
  q = p, q.q_rope_offset = 520;
  expect_invalid(q, "q_rope_offset", -1);
  q = p, q.q_token_stride = p.q_head_stride;  // H = 2 heads need 2 head strides
  expect_invalid(q, "q_token_stride", -1);
  q = p, q.o_head_stride = 256;
  expect_invalid(q, "o_head_stride", -1);
  q = p, q.o_token_stride = kLatentDim;
  expect_invalid(q, "o_token_stride", -1);
  q = p, q.k_extend_stride = 512;
  expect_invalid(q, "k_extend_stride", -1);
}

TEST(CudaValidation, QoAndKvIndptr) {
  VerifyBatch b = small_batch();
  VerifyParams p = b.params();
  std::vector<int32_t> qo = b.metadata().qo_indptr;  // [0, 4, 7]
  std::vector<int32_t> kv = b.metadata().kv_indptr;  // [0, 5, 5]
  VerifyParams q = p;
  std::vector<int32_t> bad = qo;
  bad[0] = 1;
  q.qo_indptr = bad.data();
  expect_invalid(q, "qo_indptr", 0);
  bad = qo, bad[1] = 0;  // request 0 has D = 0
  q.qo_indptr = bad.data();
  expect_invalid(q, "qo_indptr", 1);
  q = p, q.max_draft = 3;  // request 0 has D = 4
  expect_invalid(q, "qo_indptr", 1);
  q = p, q.max_total_q = 6;  // T = 7
  expect_invalid(q, "qo_indptr", 2);
  std::vector<int32_t> kbad = kv;
  kbad[0] = 1;
  q = p, q.kv_indptr = kbad.data();
  expect_invalid(q, "kv_indptr", 0);
  kbad = kv, kbad[2] = 4;  // 4 < 5: decreasing at entry 2
  q.kv_indptr = kbad.data();
  expect_invalid(q, "kv_indptr", 2);
  q = p, q.kv_indices_len = 4;  // kv_indptr[bs] = 5
  expect_invalid(q, "kv_indptr", 2);
}

TEST(CudaValidation, SlotsOutsideThePool) {
  VerifyBatch b = small_batch();
  VerifyParams p = b.params();
  std::vector<int64_t> idx = b.metadata().kv_indices;
  idx[3] = p.pool_slots;  // one past the last slot
  VerifyParams q = p;
  q.kv_indices = idx.data();
  expect_invalid(q, "kv_indices", 3);
  idx[3] = -1;
  expect_invalid(q, "kv_indices", 3);
}

// int32 ids and page tables are translated on the host; what the translation reads is checked
// first, with the model's field names and indices.
TEST(CudaValidation, Int32IndicesAndPageTables) {
  for (KvIndexing x : {KvIndexing::TokenI32, KvIndexing::PageTable}) {
    BatchSpec s;
    s.requests = {{DraftTree::from_parents({-1, 0, 0, 1}), 40}, {DraftTree::chain(3), 0}};
    s.num_heads = 2;
    s.page_size = 16;
    s.kv_indexing = x;
    s.seed = 1;
    VerifyBatch b = VerifyBatch::build(s);
    VerifyParams p = b.params();
    CudaBackend gpu;
    try {
      gpu.run(p);  // valid: runs with a device, Unsupported (no device) without
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    }
    if (x == KvIndexing::TokenI32) {
      std::vector<int32_t> idx(p.kv_indices_i32, p.kv_indices_i32 + p.kv_indices_len);
      idx[7] = static_cast<int32_t>(p.pool_slots);
      VerifyParams q = p;
      q.kv_indices_i32 = idx.data();
      expect_invalid(q, "kv_indices_i32", 7);
    } else {
      std::vector<int32_t> table(p.block_table, p.block_table + 2 * p.block_table_stride);
      table[2] = static_cast<int32_t>(p.pool_slots / p.page_size);  // request 0's third page
      VerifyParams q = p;
      q.block_table = table.data();
      expect_invalid(q, "block_table", 2);
      q = p;
      q.block_table_stride = 1;  // 40 keys need 3 pages of 16
      expect_invalid(q, "block_table_stride", 0);
    }
  }
}

TEST(CudaValidation, CacheSlotsNeedDraftSlots) {
  VerifyBatch b = small_batch(MaskFormat::FullMask, DraftKvSource::CacheSlots);
  VerifyParams p = b.params();
  std::vector<int32_t> kv = b.metadata().kv_indptr;  // [0, 9, 12]
  kv[2] = kv[1] + 2;                                 // request 1 has D = 3 but only 2 kv entries
  p.kv_indptr = kv.data();
  expect_invalid(p, "kv_indptr", 2);
}

TEST(CudaValidation, MaskExtents) {
  {
    VerifyBatch b = small_batch();  // FullMask Csr: segments 4 * 9 = 36 and 3 * 3 = 9
    VerifyParams p = b.params();
    std::vector<int64_t> mi = b.mask().indptr;
    mi[0] = 1;
    p.mask_indptr = mi.data();
    expect_invalid(p, "mask_indptr", 0);
    mi = b.mask().indptr, mi[2] = mi[1] + 8;  // request 1's segment is 9 elements
    expect_invalid(p, "mask_indptr", 2);
    p = b.params(), p.mask_len = 40;
    expect_invalid(p, "mask_indptr", 1);
  }
  {
    VerifyBatch b =
        small_batch(MaskFormat::FullMask, DraftKvSource::ExtendRows, IndptrConvention::OffsetsOnly);
    VerifyParams p = b.params();
    std::vector<int64_t> mi = b.mask().indptr;  // [0, 36]
    mi[1] = 40;                                 // 40 + 9 > 45
    p.mask_indptr = mi.data();
    expect_invalid(p, "mask_indptr", 1);
  }
  {
    VerifyBatch b = small_batch(MaskFormat::QlenOnly);
    VerifyParams p = b.params();
    p.mask_draft_stride = 3;  // request 0 has D = 4
    expect_invalid(p, "mask_draft_stride", 0);
    p = b.params(), p.mask_len = 20;  // 2 requests * 4 * 4 = 32 bytes
    expect_invalid(p, "mask", -1);
  }
  {
    VerifyBatch b = small_batch(MaskFormat::QlenOnlyBitpacking);
    VerifyParams p = b.params();
    p.mask_word_bytes = 3;
    expect_invalid(p, "mask_word_bytes", -1);
  }
  {
    VerifyBatch b = small_batch(MaskFormat::DraftBits);
    VerifyParams p = b.params();
    p.mask_draft_stride = 0;
    expect_invalid(p, "mask_draft_stride", 0);
    p = b.params(), p.mask_len = 5;  // T = 7 rows of one word
    expect_invalid(p, "mask", -1);
  }
}

// The kernel's static checks: a clear reason, never a throw.
TEST(CudaSupport, KernelStaticChecks) {
  VerifyBatch b = small_batch();
  VerifyParams p = b.params();
  // Host pointers of a VerifyBatch may be 16-byte aligned or not; pointer checks are the
  // kernel's (device pointers), so test the stride rules through a copy with aligned fakes.
  alignas(16) static unsigned char fake[64];
  VerifyParams d = p;
  d.q = d.kv_pool = d.k_extend = d.mask = fake;
  d.o_lat = fake;
  d.lse = reinterpret_cast<float*>(fake);
  EXPECT_TRUE(VerifyKernel::can_implement(d)) << VerifyKernel::can_implement(d).reason;
  VerifyParams x = d;
  x.q_head_stride = 580;  // 16-byte loads need multiples of 8 elements
  x.q_token_stride = 2 * 580;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.kv_dtype = DType::F32;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.q_dtype = DType::F32;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.kv_layout = KvLayout::latent_first(580);
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.q = fake + 2;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.batch_size = 70000;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  x = d, x.num_splits = 0;
  EXPECT_FALSE(VerifyKernel::can_implement(x));
  EXPECT_NE(VerifyKernel::can_implement(x).reason.find("num_splits"), std::string::npos);
}

// The lifecycle refuses before touching the device: unsupported params, a missing or misaligned
// workspace, run(), plan() or attend() before initialize().
TEST(CudaSupport, LifecycleRefusesBadSetup) {
  VerifyBatch b = small_batch();
  alignas(16) static unsigned char fake[64];
  VerifyParams d = b.params();
  d.q = d.kv_pool = d.k_extend = d.mask = fake;
  d.o_lat = fake;
  d.lse = reinterpret_cast<float*>(fake);
  VerifyKernel k;
  EXPECT_THROW(k.run(), Unsupported);
  EXPECT_THROW(k.plan(), Unsupported);
  EXPECT_THROW(k.attend(), Unsupported);
  EXPECT_THROW(k.initialize(d, nullptr, nullptr), Unsupported);
  EXPECT_THROW(k.initialize(d, fake + 4, nullptr), Unsupported);
  VerifyParams bad = d;
  bad.kv_dtype = DType::F32;
  EXPECT_THROW(k.initialize(bad, fake, nullptr), Unsupported);
  // (num_splits + 1) x max_total_q x H x 513 floats: 2 x 7 x 2 x 513 x 4 bytes here.
  d.num_splits = 1;
  EXPECT_EQ(VerifyKernel::workspace_bytes(d), size_t{2} * 7 * 2 * 513 * 4);
}

TEST(CudaSupport, BackendNamesTheMissingDevice) {
  VerifyBatch b = small_batch();
  CudaBackend gpu;
  EXPECT_EQ(gpu.name(), "cuda");
  EXPECT_EQ(make_cuda_backend()->name(), "cuda");
  const Support dev = cuda_device_available();
  const Support s = gpu.can_implement(b.params());
  if (!dev) {
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("no CUDA device"), std::string::npos) << s.reason;
  } else {
    EXPECT_TRUE(s) << s.reason;
  }
  // An fp32 pool is well-formed but not what the kernel reads: Unsupported, with the reason.
  BatchSpec f32;
  f32.requests = {{DraftTree::chain(2), 3}};
  f32.kv_dtype = DType::F32;
  VerifyBatch fb = VerifyBatch::build(f32);
  const Support sf = gpu.can_implement(fb.params());
  EXPECT_FALSE(sf);
  EXPECT_NE(sf.reason.find(dev ? "bf16" : "no CUDA device"), std::string::npos) << sf.reason;
  EXPECT_THROW(gpu.run(fb.params()), Unsupported);
}

TEST(CudaSupport, KernelVariantChoiceNeverSubstitutes) {
  // Defaults: wgmma on Hopper when the build has it, the sm_120-sized mma.sync kernel elsewhere.
  EXPECT_EQ(choose_variant(nullptr, 9, 0, true), KernelVariant::Wgmma);
  EXPECT_EQ(choose_variant("", 9, 0, true), KernelVariant::Wgmma);
  EXPECT_EQ(choose_variant(nullptr, 9, 0, false), KernelVariant::Mma2);
  EXPECT_EQ(choose_variant(nullptr, 12, 0, true), KernelVariant::Mma2);
  EXPECT_EQ(choose_variant(nullptr, 8, 9, true), KernelVariant::Mma2);
  // MLAV_CUDA_KERNEL picks any variant the device and build can run.
  EXPECT_EQ(choose_variant("wgmma", 9, 0, true), KernelVariant::Wgmma);
  EXPECT_EQ(choose_variant("mma6", 9, 0, true), KernelVariant::Mma6);
  EXPECT_EQ(choose_variant("mma2", 9, 0, true), KernelVariant::Mma2);
  EXPECT_EQ(choose_variant("mma2", 12, 0, true), KernelVariant::Mma2);
  // An unknown name is named back; a variant this device or build cannot run is refused with
  // the reason. Neither falls back to another kernel without a word.
  mlaverify::testing::expect_invalid([] { choose_variant("mma4", 9, 0, true); },
                                     "MLAV_CUDA_KERNEL", -1, "expected wgmma, mma6 or mma2");
  mlaverify::testing::expect_invalid([] { choose_variant("WGMMA", 9, 0, true); },
                                     "MLAV_CUDA_KERNEL", -1);
  EXPECT_THROW(choose_variant("wgmma", 12, 0, true), Unsupported);
  EXPECT_THROW(choose_variant("mma6", 9, 0, false), Unsupported);
  try {
    choose_variant("wgmma", 12, 0, true);
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("sm_120"), std::string::npos) << e.what();
  }
}

TEST(CudaSupport, SuggestedSplitsFillTheMachine) {
  // docs/spec.md §8 k2-tp8-tree16: 16 requests x 2 row tiles = 32 blocks per split; one wave of
  // prefix blocks on 132 SMs holds 4 splits (128 blocks); 5 would need 160, a second wave.
  const int32_t s = suggest_num_splits(16, 8, 16, 8192, 132);
  EXPECT_EQ(s, 4);
  EXPECT_LE(16 * 2 * s, 132);
  EXPECT_LE(s, kMaxSplits);
  // A short prefix caps the split count (at least 4 tiles per split).
  EXPECT_EQ(suggest_num_splits(1, 1, 1, 64 * 8, 132), 2);
  EXPECT_EQ(suggest_num_splits(1, 1, 1, 0, 132), 1);
}

// The residency argument and the RTX PRO 6000's 188 SMs (cuda/NOTES.md v16): one wave holds
// sm_count * blocks_per_sm prefix blocks. k2-tp8-tree16 has 32 blocks per split: 4 splits on 132
// SMs x 1, 5 on 188 x 1 (188 / 32 = 5.9), 8 on 132 x 2 (264 / 32 = 8.25).
TEST(CudaSupport, SuggestedSplitsUseSmCountAndResidency) {
  EXPECT_EQ(suggest_num_splits(16, 8, 16, 8192, 188), 5);
  EXPECT_EQ(suggest_num_splits(16, 8, 16, 8192, 132, 2), 8);
  EXPECT_EQ(suggest_num_splits(16, 8, 16, 8192, 188, 1), suggest_num_splits(16, 8, 16, 8192, 188));
  // long-ctx: 2 requests x 4 row tiles = 8 blocks per split; 188 / 8 = 23 splits.
  EXPECT_EQ(suggest_num_splits(2, 16, 16, 65536, 188), 23);
  // The length cap still binds: 8 tiles allow 2 splits however many SMs there are.
  EXPECT_EQ(suggest_num_splits(1, 1, 1, 64 * 8, 188, 4), 2);
}

// MLAV_MMA2_RING=ws sends a batch of one 64-row tile per request to ring 4 (cuda/NOTES.md v37),
// unless MLAV_WS_ROUTE=0; the other rings pass through; a bad MLAV_WS_ROUTE is refused by name.
TEST(CudaSupport, WsRouteSendsOneRowTileBatchesToRing4) {
  EXPECT_EQ(row_tiles(4, 16), 1);  // v3-tp8-chain4: 16 heads x 4 draft tokens
  EXPECT_EQ(route_mma2_ring(kMma2RingWs, row_tiles(4, 16), nullptr), kMma2Ring4);
  EXPECT_EQ(route_mma2_ring(kMma2RingWs, row_tiles(4, 16), "1"), kMma2Ring4);
  EXPECT_EQ(route_mma2_ring(kMma2RingWs, row_tiles(16, 8), ""), kMma2RingWs);  // k2-tp8-tree16
  EXPECT_EQ(route_mma2_ring(kMma2RingWs, row_tiles(32, 16), nullptr), kMma2RingWs);
  EXPECT_EQ(route_mma2_ring(kMma2RingWs, row_tiles(4, 16), "0"), kMma2RingWs);
  EXPECT_EQ(route_mma2_ring(3, 1, nullptr), 3);
  EXPECT_EQ(route_mma2_ring(2, 1, "0"), 2);
  mlaverify::testing::expect_invalid([] { route_mma2_ring(kMma2RingWs, 2, "yes"); },
                                     "MLAV_WS_ROUTE", -1);
}

// The sm_120 kernel's pipeline knobs: defaults, every compiled pair, and a named refusal of
// anything else (never a silent substitute).
TEST(CudaSupport, Mma2RingL1AndCarveoutChoices) {
  // The default ring: ws where one of its arch-specific images runs (12.0: sm_120a, 9.0:
  // sm_90a; the build's MLAV_WS_IMAGE_* say which it compiled), ring 4 elsewhere (12.1 cannot run
  // an sm_120a cubin); an explicit ring is the same on every device.
#ifdef MLAV_WS_IMAGE_SM120A
  constexpr int k120 = kMma2RingWs;
#else
  constexpr int k120 = kMma2Ring4;
#endif
#ifdef MLAV_WS_IMAGE_SM90A
  constexpr int k90 = kMma2RingWs;
#else
  constexpr int k90 = kMma2Ring4;
#endif
  EXPECT_EQ(choose_mma2_ring(nullptr, 12, 0), k120);
  EXPECT_EQ(choose_mma2_ring("", 9, 0), k90);
  EXPECT_EQ(choose_mma2_ring(nullptr, 12, 1), kMma2Ring4);
  EXPECT_EQ(choose_mma2_ring(nullptr, 8, 9), kMma2Ring4);
  EXPECT_EQ(choose_mma2_ring("4", 12, 0), 4);
  EXPECT_EQ(choose_mma2_ring("2", 12, 0), 2);
  EXPECT_EQ(choose_mma2_ring("3", 12, 1), 3);
  mlaverify::testing::expect_invalid([] { choose_mma2_ring("5", 12, 0); }, "MLAV_MMA2_RING", -1);
  mlaverify::testing::expect_invalid([] { choose_mma2_ring("4 ", 12, 0); }, "MLAV_MMA2_RING", -1);
  EXPECT_EQ(choose_mma2_l1(nullptr, 4), kMma2L1Default);
  EXPECT_EQ(choose_mma2_l1("2", 3), 2);
  EXPECT_EQ(choose_mma2_l1("0", 2), 0);
  mlaverify::testing::expect_invalid([] { choose_mma2_l1("2", 4); }, "MLAV_MMA2_L1", -1);
  mlaverify::testing::expect_invalid([] { choose_mma2_l1("x", 3); }, "MLAV_MMA2_L1", -1);
  // The warp-specialized kernel: "ws" where the build holds it (no L1-staged form), refused by
  // name where it does not.
  if (mma2_ws_compiled()) {
    if (k120 == kMma2RingWs) {
      EXPECT_EQ(choose_mma2_ring("ws", 12, 0), kMma2RingWs);
    }
    if (k90 == kMma2RingWs) {
      EXPECT_EQ(choose_mma2_ring("ws", 9, 0), kMma2RingWs);
    }
    mlaverify::testing::expect_invalid([] { choose_mma2_ring("ws", 12, 1); }, "MLAV_MMA2_RING",
                                       -1);
    EXPECT_EQ(choose_mma2_l1(nullptr, kMma2RingWs), 0);
    mlaverify::testing::expect_invalid([] { choose_mma2_l1("2", kMma2RingWs); }, "MLAV_MMA2_L1",
                                       -1);
  } else {
    mlaverify::testing::expect_invalid([] { choose_mma2_ring("ws", 12, 0); }, "MLAV_MMA2_RING",
                                       -1);
  }
  // The rule: the smallest percentage of the SM's shared memory holding the block and the 1 KB
  // the driver reserves. H200 (233,472 B per SM): (100,864 + 1,024) / 233,472 = 43.6% -> 44.
  // RTX PRO 6000 (102,400 B): 99.5% -> 100.
  EXPECT_EQ(choose_carveout(nullptr, 100864, 233472), 44);
  EXPECT_EQ(choose_carveout(nullptr, 100864, 102400), 100);
  EXPECT_EQ(choose_carveout(nullptr, 100864, 0), -1);
  EXPECT_EQ(choose_carveout("100", 100864, 233472), 100);
  EXPECT_EQ(choose_carveout("-1", 100864, 233472), -1);
  mlaverify::testing::expect_invalid([] { choose_carveout("101", 1, 1); }, "MLAV_SMEM_CARVEOUT",
                                     -1);
}

TEST(CudaSupport, DraftPlanFoldsUnlessDraftBlocksFitTheFreeSms) {
  // docs/spec.md §8 on 132 SMs, with the splits suggest_num_splits picks. k2-tp8-ddtree128: 4
  // requests x 16 row tiles = 64 draft blocks, 2 splits leave 132 - 128 = 4 SMs free: 16 rounds,
  // folded.
  EXPECT_TRUE(choose_folded(nullptr, 4, 8, 128, 2, 132));
  // long-ctx: 2 x 4 = 8 draft blocks, 16 splits leave 4 SMs: 2 rounds, unfolded.
  EXPECT_FALSE(choose_folded(nullptr, 2, 16, 16, 16, 132));
  // No SM free at all: folded (the draft blocks would only start as prefix blocks end).
  EXPECT_TRUE(choose_folded("", 1, 128, 66, 66, 132));
  // MLAV_DRAFT_PLAN forces either; anything else is an error naming the variable.
  EXPECT_FALSE(choose_folded("unfolded", 4, 8, 128, 2, 132));
  EXPECT_TRUE(choose_folded("folded", 2, 16, 16, 16, 132));
  try {
    choose_folded("fold", 4, 8, 128, 2, 132);
    ADD_FAILURE() << "no error for MLAV_DRAFT_PLAN=fold";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("MLAV_DRAFT_PLAN"), std::string::npos) << e.what();
  }
}

TEST(CudaSupport, PlanPdlByKernelUnlessForced) {
  // The default: stream order for the wgmma kernel, the dependent launch for the mma.sync ones
  // (cuda/NOTES.md v26); "0" and "1" force either; anything else names the variable.
  EXPECT_FALSE(choose_plan_pdl(nullptr, KernelVariant::Wgmma));
  EXPECT_FALSE(choose_plan_pdl("", KernelVariant::Wgmma));
  EXPECT_TRUE(choose_plan_pdl(nullptr, KernelVariant::Mma2));
  EXPECT_TRUE(choose_plan_pdl(nullptr, KernelVariant::Mma6));
  EXPECT_TRUE(choose_plan_pdl("1", KernelVariant::Wgmma));
  EXPECT_FALSE(choose_plan_pdl("0", KernelVariant::Mma2));
  for (const char* bad : {"yes", "2", " 1"})
    mlaverify::testing::expect_invalid([&] { choose_plan_pdl(bad, KernelVariant::Mma2); },
                                       "MLAV_PLAN_PDL", -1);
}

TEST(CudaSupport, ClusterMergeWhereClustersCostNoSm) {
  // docs/spec.md §8 on the H200 (132 SMs; 66 clusters of 2 and 32 of 4 fit, cuda/NOTES.md v15):
  // ddtree128, 128 blocks in clusters of 2.
  EXPECT_TRUE(choose_cluster_merge(nullptr, true, 2, 66, 128, 132));
  // Clusters of 4 that hold fewer blocks at once than the SMs would: the merge kernel.
  EXPECT_FALSE(choose_cluster_merge(nullptr, true, 4, 30, 128, 132));
  // ... unless the grid is smaller than what they hold.
  EXPECT_TRUE(choose_cluster_merge(nullptr, true, 4, 30, 64, 132));
  // Unfolded (the draft has blocks of its own), more than 8 splits, or no cluster fits.
  EXPECT_FALSE(choose_cluster_merge(nullptr, false, 2, 66, 128, 132));
  EXPECT_FALSE(choose_cluster_merge("", true, 16, 8, 128, 132));
  EXPECT_FALSE(choose_cluster_merge(nullptr, true, 2, 0, 128, 132));
  // MLAV_MERGE forces either; forcing clusters where there are none is Unsupported naming it,
  // anything else InvalidInput naming it.
  EXPECT_FALSE(choose_cluster_merge("kernel", true, 2, 66, 128, 132));
  EXPECT_TRUE(choose_cluster_merge("cluster", true, 4, 30, 128, 132));
  for (const char* bad : {"clusters", "none"}) {
    try {
      choose_cluster_merge(bad, true, 2, 66, 128, 132);
      ADD_FAILURE() << "no error for MLAV_MERGE=" << bad;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("MLAV_MERGE"), std::string::npos) << e.what();
    }
  }
  try {
    choose_cluster_merge("cluster", false, 2, 66, 128, 132);
    ADD_FAILURE() << "no error for MLAV_MERGE=cluster with the unfolded plan";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("MLAV_MERGE"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlaverify::cuda::testing

// CudaBackend against the double-precision model and the CPU backend (same algorithm), plus the
// bit-exact laws of the kernel: layout, draft source, poisoning, padding and run-to-run invariance.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/tree.h"
#include "tests/cuda/fault_kernel.h"
#include "tests/cuda/gpu_bounds.h"
#include "tests/cuda/test_util.h"

namespace mlaverify::cuda::testing {
namespace {

using model::BatchSpec;
using model::DraftTree;
using model::RequestSpec;
using model::VerifyBatch;

// One scenario of the comparison suite: shapes chosen for the edges the kernel has (tile and
// split boundaries, P = 0 and 1, D not a power of two, row tiles across nodes, H = 1 and 128).
struct Scenario {
  std::string name;
  std::vector<int32_t> draft;   // D_i per request (random trees; chain when `chain`)
  std::vector<int64_t> prefix;  // P_i per request
  int32_t heads = 8;
  int32_t splits = 1;
  MaskFormat format = MaskFormat::FullMask;
  IndptrConvention conv = IndptrConvention::Csr;
  LayoutKind layout = LayoutKind::LatentFirst;
  int64_t row_stride = kRowDim;
  DraftKvSource source = DraftKvSource::ExtendRows;
  int32_t page_size = 1;
  bool chain = false;
  int32_t plan_blocks = 0;  // > 0: the balanced split plan (splits is then its cap)
};

BatchSpec spec_of(const Scenario& s, uint64_t seed) {
  BatchSpec spec;
  Rng rng(seed * 7919 + 13);
  for (size_t i = 0; i < s.draft.size(); ++i)
    spec.requests.push_back(RequestSpec{
        s.chain ? DraftTree::chain(s.draft[i]) : random_tree(s.draft[i], rng), s.prefix[i]});
  spec.num_heads = s.heads;
  spec.num_splits = s.splits;
  spec.plan_blocks = s.plan_blocks;
  spec.mask_format = s.format;
  spec.mask_indptr_convention = s.conv;
  spec.layout.kind = s.layout;
  spec.row_stride = s.row_stride;
  spec.draft_source = s.source;
  spec.page_size = s.page_size;
  // Scores have std ~ sm_scale * 0.25^2 * 24 = 0.2: softmax neither flat nor one-hot, and the
  // bound stays meaningful (gpu_bounds.h: it grows with sm_scale ||q|| ||k||).
  spec.value_scale = 0.25;
  if (s.format == MaskFormat::QlenOnlyBitpacking) spec.mask_word_bytes = 4;
  spec.seed = seed;
  return spec;
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> v;
  v.push_back({"h1-d1-p0", {1}, {0}, 1});
  v.push_back({"p1-splits2", {5, 3}, {1, 2}, 8, 2});
  v.push_back({"tile-edges", {16, 7, 1}, {63, 64, 65}, 4});
  v.push_back({"splits-uneven", {4, 9}, {1000, 130}, 8, 7});
  v.push_back({"h128-d8", {8}, {300}, 128, 3});
  v.push_back({"wide-draft", {100}, {77}, 3, 2});
  v.push_back({"chain4-p4096",
               {4, 4},
               {4096, 4000},
               16,
               4,
               MaskFormat::FullMask,
               IndptrConvention::Csr,
               LayoutKind::LatentFirst,
               kRowDim,
               DraftKvSource::ExtendRows,
               1,
               true});
  v.push_back({"qlen-only", {6, 11}, {70, 5}, 2, 1, MaskFormat::QlenOnly});
  v.push_back({"bitpacking", {8, 20}, {70, 5}, 2, 2, MaskFormat::QlenOnlyBitpacking});
  v.push_back({"flashinfer-packed", {7, 13}, {33, 129}, 2, 2, MaskFormat::FlashInferPacked});
  v.push_back({"draft-bits", {40, 3}, {64, 0}, 2, 1, MaskFormat::DraftBits});
  v.push_back({"offsets-only",
               {5, 6, 7},
               {10, 0, 65},
               2,
               2,
               MaskFormat::FullMask,
               IndptrConvention::OffsetsOnly});
  v.push_back({"split-layout",
               {9, 4},
               {100, 3},
               4,
               2,
               MaskFormat::FullMask,
               IndptrConvention::Csr,
               LayoutKind::Split});
  v.push_back({"padded-rows-640",
               {9, 4},
               {100, 3},
               4,
               2,
               MaskFormat::FullMask,
               IndptrConvention::Csr,
               LayoutKind::LatentFirst,
               640});
  v.push_back({"cache-slots-paged",
               {12, 2},
               {200, 17},
               4,
               3,
               MaskFormat::FullMask,
               IndptrConvention::Csr,
               LayoutKind::LatentFirst,
               kRowDim,
               DraftKvSource::CacheSlots,
               16});
  v.push_back({"d1024-draftbits", {1024}, {10}, 1, 1, MaskFormat::DraftBits});
  // docs/spec.md §7 class 10: bs equal to D (a [bs, D] / [D, bs] mix-up reads the wrong rows).
  v.push_back({"bs-equals-d", {3, 3, 3}, {5, 64, 0}, 3, 2});
  // The balanced plan (split_plan.h, issue 13): each request split by its own length, planned
  // on the device, with few plan blocks so that small batches split unevenly: one long request
  // beside short ones, P = 0 and 1 beside P = 20,000, bs == D, D not a power of two.
  auto balanced = [](std::string name, std::vector<int32_t> d, std::vector<int64_t> p,
                     int32_t heads, int32_t cap, int32_t blocks) {
    Scenario s{std::move(name), std::move(d), std::move(p), heads, cap};
    s.plan_blocks = blocks;
    return s;
  };
  v.push_back(balanced("balanced-long-short", {16, 4, 7, 1}, {3000, 0, 1, 200}, 8, 16, 12));
  v.push_back(balanced("balanced-p0-p1-p20000", {4, 3, 5}, {0, 1, 20000}, 2, 32, 40));
  v.push_back(balanced("balanced-bs-equals-d", {3, 3, 3}, {5, 640, 0}, 3, 8, 6));
  v.push_back(balanced("balanced-cap", {9, 2}, {5000, 70}, 4, 3, 64));
  // A batch of at most 4 requests whose long request has more than 32 units (32 splits x 4 row
  // tiles): the planning kernel's warp-per-request stores write units k >= 32 in a second and
  // later round of the warp's lanes (cuda/verify_plan.cu; the cases above have at most 32).
  v.push_back(balanced("balanced-warp-stores", {16, 3}, {20000, 7}, 16, 32, 132));
  return v;
}

// Copies a batch's current outputs into a RefResult so a second backend can be compared with it.
model::RefResult outputs_of(const VerifyBatch& b) {
  model::RefResult r;
  r.tokens = b.total_tokens();
  r.heads = b.spec().num_heads;
  r.o_lat.resize(static_cast<size_t>(r.tokens) * r.heads * kLatentDim);
  r.lse.resize(static_cast<size_t>(r.tokens) * r.heads);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int32_t h = 0; h < r.heads; ++h) {
      r.lse[t * r.heads + h] = b.lse_value(t, h);
      for (int k = 0; k < kLatentDim; ++k)
        r.o_lat[(t * r.heads + h) * kLatentDim + k] = b.o_lat_value(t, h, k);
    }
  return r;
}

class CudaVsReference : public ::testing::TestWithParam<Scenario> {
 protected:
  void SetUp() override { MLAV_SKIP_WITHOUT_DEVICE(); }
};

// Each backend within its derived bound of the model; CUDA and CPU within the sum of their bounds
// (2x: the triangle inequality through the model). The measured ratios go to stdout so the report
// can show how much tighter CUDA-vs-CPU is than CUDA-vs-model.
TEST_P(CudaVsReference, WithinDerivedBoundOfModelAndCpu) {
  const Scenario& s = GetParam();
  VerifyBatch batch = VerifyBatch::build(spec_of(s, 42));
  CudaBackend gpu;
  ASSERT_TRUE(gpu.can_implement(batch.params())) << gpu.can_implement(batch.params()).reason;
  gpu.run(batch.params());
  const model::RefResult cuda_out = outputs_of(batch);
  const model::RefResult ref = model::reference_verify(batch.params());

  double worst_model = 0, worst_cpu = 0, frob_model = 0, frob_cpu = 0;
  std::vector<Magnitudes> mags;
  std::vector<Bound> bounds;
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    mags.push_back(magnitudes(batch, i));
    bounds.push_back(derive_bound(mags.back(), batch.params().sm_scale, s.splits));
    const Measured m = compare_request(batch, ref, i, mags.back(), bounds.back());
    EXPECT_TRUE(m.finite) << s.name << " request " << i;
    EXPECT_TRUE(m.masked_ok) << s.name << " request " << i;
    EXPECT_LE(m.o_ratio, 1.0) << s.name << " worst " << m.worst;
    EXPECT_LE(m.lse_ratio, 1.0) << s.name << " request " << i;
    worst_model = std::max({worst_model, m.o_ratio, m.lse_ratio});
    frob_model = std::max(frob_model, m.rel_frob);
  }

  // The CPU backend on the plan the kernel ran (folded or not): the same partial sums.
  cpu::CpuBackend cpu_backend({.folded = gpu.last_run_folded()});
  batch.poison_outputs();
  cpu_backend.run(batch.params());
  for (int32_t i = 0; i < batch.real_batch_size(); ++i) {
    Bound twice = {2 * bounds[i].o_coeff, 2 * bounds[i].lse_abs};
    const Measured m = compare_request(batch, cuda_out, i, mags[i], twice);
    EXPECT_LE(m.o_ratio, 1.0) << s.name << " cpu vs cuda, worst " << m.worst;
    EXPECT_LE(m.lse_ratio, 1.0) << s.name << " cpu vs cuda, request " << i;
    worst_cpu = std::max({worst_cpu, m.o_ratio, m.lse_ratio});
    frob_cpu = std::max(frob_cpu, m.rel_frob);
  }
  std::printf(
      "[ratio] %-20s cuda-vs-model %.3e of bound (rel frob %.2e); cuda-vs-cpu %.3e of "
      "bound (rel frob %.2e)\n",
      s.name.c_str(), worst_model, frob_model, worst_cpu, frob_cpu);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, CudaVsReference, ::testing::ValuesIn(scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& i) {
                           std::string n = i.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

class CudaLaws : public ::testing::Test {
 protected:
  void SetUp() override { MLAV_SKIP_WITHOUT_DEVICE(); }
  CudaBackend gpu;

  std::vector<uint16_t> run_bits(VerifyBatch& b, std::vector<float>* lse = nullptr) {
    b.poison_outputs();
    gpu.run(b.params());
    std::vector<uint16_t> bits;
    for (const bf16& x : b.o_lat()) bits.push_back(x.bits);
    if (lse) *lse = b.lse();
    return bits;
  }
};

BatchSpec law_spec(uint64_t seed) {
  Scenario s{"law", {9, 17, 3}, {130, 0, 64}, 8, 3};
  return spec_of(s, seed);
}

// The same logical data read through different addresses must give the same bits: the kernel
// loads identical values in identical order whatever the layout or the draft KV source.
TEST_F(CudaLaws, LayoutsAndDraftSourcesAreBitIdentical) {
  BatchSpec base = law_spec(7);
  VerifyBatch ref_batch = VerifyBatch::build(base);
  std::vector<float> ref_lse;
  const std::vector<uint16_t> ref = run_bits(ref_batch, &ref_lse);
  struct Variant {
    const char* name;
    LayoutKind kind;
    int64_t stride;
    DraftKvSource source;
    BatchSpec::SlotOrder order;
  };
  for (const Variant& v : {Variant{"split", LayoutKind::Split, kRowDim, DraftKvSource::ExtendRows,
                                   BatchSpec::SlotOrder::Scattered},
                           Variant{"stride640", LayoutKind::LatentFirst, 640,
                                   DraftKvSource::ExtendRows, BatchSpec::SlotOrder::Contiguous},
                           Variant{"cache-slots", LayoutKind::LatentFirst, kRowDim,
                                   DraftKvSource::CacheSlots, BatchSpec::SlotOrder::Scattered}}) {
    BatchSpec s = base;
    s.layout.kind = v.kind;
    s.row_stride = v.stride;
    s.draft_source = v.source;
    s.slot_order = v.order;
    VerifyBatch b = VerifyBatch::build(s);
    std::vector<float> lse;
    EXPECT_EQ(run_bits(b, &lse), ref) << v.name;
    EXPECT_EQ(0, std::memcmp(lse.data(), ref_lse.data(), lse.size() * 4)) << v.name;
  }
}

// The balanced plan of a batch of equal requests is the uniform plan with the split count
// plan_blocks gives them (split_plan.h): identical bits. plan_blocks 8 over 4 requests of one
// row tile each: 2 splits.
TEST_F(CudaLaws, BalancedPlanOfEqualRequestsIsTheUniformPlan) {
  Scenario s{"equal", {8, 8, 8, 8}, {1000, 1000, 1000, 1000}, 8, 2};
  VerifyBatch uniform = VerifyBatch::build(spec_of(s, 21));
  const std::vector<uint16_t> want = run_bits(uniform);
  s.splits = 16;
  s.plan_blocks = 8;
  VerifyBatch balanced = VerifyBatch::build(spec_of(s, 21));
  EXPECT_EQ(run_bits(balanced), want);
}

// Every mask format encodes the same trees: identical bits.
TEST_F(CudaLaws, MaskFormatsAreBitIdentical) {
  Scenario s{"fmt", {8, 20, 5}, {70, 5, 64}, 4, 2};
  VerifyBatch ref_batch = VerifyBatch::build(spec_of(s, 3));
  const std::vector<uint16_t> ref = run_bits(ref_batch);
  for (MaskFormat f : {MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking,
                       MaskFormat::FlashInferPacked, MaskFormat::DraftBits}) {
    s.format = f;
    VerifyBatch b = VerifyBatch::build(spec_of(s, 3));
    EXPECT_EQ(run_bits(b), ref) << "format " << static_cast<int>(f);
  }
  s.format = MaskFormat::FullMask;
  s.conv = IndptrConvention::OffsetsOnly;
  VerifyBatch b = VerifyBatch::build(spec_of(s, 3));
  EXPECT_EQ(run_bits(b), ref) << "offsets-only mask_indptr";
}

// NaN in every pool slot no request names (docs/spec.md §5): the output does not change by one bit.
TEST_F(CudaLaws, NanPoisonedPoolChangesNothing) {
  BatchSpec clean = law_spec(11);
  clean.poison_unused_slots = false;
  BatchSpec poisoned = clean;
  poisoned.poison_unused_slots = true;
  VerifyBatch a = VerifyBatch::build(clean);
  VerifyBatch b = VerifyBatch::build(poisoned);
  const std::vector<uint16_t> bits = run_bits(a);
  EXPECT_EQ(run_bits(b), bits);
  for (uint16_t x : bits) ASSERT_FALSE(std::isnan(bf16_to_float(bf16{x})));
}

// CUDA-graph padding (docs/spec.md §3): padded rows (P = 1, slot 0, garbage mask bytes) must not
// fault, leak NaN, or change a real row by one bit.
TEST_F(CudaLaws, GraphPaddedRowsChangeNoRealRow) {
  BatchSpec s = law_spec(5);
  VerifyBatch plain = VerifyBatch::build(s);
  const std::vector<uint16_t> ref = run_bits(plain);
  for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::QlenOnly, MaskFormat::DraftBits}) {
    BatchSpec ps = s;
    ps.mask_format = f;
    ps.graph_padded_bs = 8;
    VerifyBatch padded = VerifyBatch::build(ps);
    BatchSpec us = s;
    us.mask_format = f;
    VerifyBatch unpadded = VerifyBatch::build(us);
    const std::vector<uint16_t> want = run_bits(unpadded);
    std::vector<float> lse;
    const std::vector<uint16_t> got = run_bits(padded, &lse);
    const size_t real = static_cast<size_t>(padded.real_tokens()) * s.num_heads * kLatentDim;
    ASSERT_GE(got.size(), real);
    EXPECT_TRUE(std::equal(want.begin(), want.begin() + real, got.begin())) << "format " << int(f);
    EXPECT_EQ(want, ref) << "format " << int(f);
    // Padded rows read finite slot-0 data: whatever they compute, it is not NaN.
    for (size_t k = real; k < got.size(); ++k)
      ASSERT_FALSE(std::isnan(bf16_to_float(bf16{got[k]}))) << "padded element " << k;
    for (float x : lse) ASSERT_FALSE(std::isnan(x));
  }
}

// A row whose node sees nothing (no prefix, its own diagonal cleared) yields o = 0, lse = -inf.
TEST_F(CudaLaws, FullyMaskedRowGivesZerosAndMinusInf) {
  Scenario s{"masked", {6, 4}, {0, 3}, 2, 1, MaskFormat::QlenOnly};
  VerifyBatch b = VerifyBatch::build(spec_of(s, 9));
  model::EncodedMask& m = b.mask();
  const int32_t stride = m.draft_stride;
  for (int32_t j = 0; j < stride; ++j)
    m.data[static_cast<size_t>(2) * stride + j] = 0;  // req 0, row 2
  std::vector<float> lse;
  run_bits(b, &lse);
  for (int32_t h = 0; h < 2; ++h) {
    EXPECT_TRUE(std::isinf(lse[2 * 2 + h]) && lse[2 * 2 + h] < 0) << "head " << h;
    for (int k = 0; k < kLatentDim; ++k) ASSERT_EQ(b.o_lat_value(2, h, k), 0.f);
  }
  // The other rows are as the model says (the model applies the same rule).
  const model::RefResult ref = model::reference_verify(b.params());
  for (int32_t i = 0; i < 2; ++i) {
    const Magnitudes mg = magnitudes(b, i);
    const Measured r = compare_request(b, ref, i, mg, derive_bound(mg, b.params().sm_scale, 1));
    EXPECT_TRUE(r.masked_ok);
    EXPECT_LE(r.o_ratio, 1.0) << r.worst;
  }
}

// Same input, same bits: no race, no uninitialized read shows up as run-to-run drift.
TEST_F(CudaLaws, RunsAreDeterministic) {
  VerifyBatch b = VerifyBatch::build(law_spec(21));
  const std::vector<uint16_t> first = run_bits(b);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(run_bits(b), first) << "run " << r;
}

// Backend::last_device_ms: -1 before any run, then the kernels' own time, which is positive and
// no longer than the run's wall time (events on the stream around the launches only).
TEST_F(CudaLaws, DeviceTimeIsMeasuredPerRun) {
  EXPECT_EQ(gpu.last_device_ms(), -1);
  VerifyBatch b = VerifyBatch::build(law_spec(23));
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gpu.run(b.params());
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GT(gpu.last_device_ms(), 0) << "run " << r;
    EXPECT_LE(gpu.last_device_ms(), wall) << "run " << r;
  }
}

// Sets MLAV_MERGE for its lifetime, then restores what was there (the variable is read at each
// initialize, i.e. at each CudaBackend::run).
class MergeEnv {
 public:
  explicit MergeEnv(const char* value) {
    if (const char* old = std::getenv("MLAV_MERGE")) saved_ = old, had_ = true;
    ::setenv("MLAV_MERGE", value, 1);
  }
  ~MergeEnv() {
    if (had_)
      ::setenv("MLAV_MERGE", saved_.c_str(), 1);
    else
      ::unsetenv("MLAV_MERGE");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

// The wgmma kernel's cluster merge runs merge_row's arithmetic on the same fp32 partials as the
// merge kernel, read from the cluster's shared memory instead of the workspace: identical bits
// for every split count a cluster takes (1..8), with empty splits (short prefixes, many splits),
// both output dtypes' store path (bf16 here) and lse. Where the cluster merge cannot run (mma.sync
// kernels, the unfolded plan) this says so and skips.
TEST_F(CudaLaws, ClusterMergeIsBitIdenticalToTheMergeKernel) {
  const std::vector<Scenario> cases = {
      {"ns1", {9, 17, 3}, {130, 0, 64}, 8, 1},
      {"ns2-p1", {5, 3}, {1, 2}, 8, 2},
      {"ns3-h128", {8}, {300}, 128, 3},
      {"ns4-empty", {4, 40}, {0, 700}, 16, 4},
      {"ns7-uneven", {4, 9}, {1000, 130}, 8, 7},
      {"ns8", {33, 2}, {2000, 5}, 4, 8},
  };
  int ran = 0;
  std::string why;
  for (const Scenario& sc : cases) {
    VerifyBatch b = VerifyBatch::build(spec_of(sc, 17));
    std::vector<float> lse_kernel, lse_cluster;
    std::vector<uint16_t> via_kernel, via_cluster;
    {
      MergeEnv env("kernel");
      via_kernel = run_bits(b, &lse_kernel);
    }
    try {
      MergeEnv env("cluster");
      via_cluster = run_bits(b, &lse_cluster);
    } catch (const Unsupported& e) {
      why = e.what();
      continue;
    }
    ++ran;
    EXPECT_EQ(via_cluster, via_kernel) << sc.name;
    ASSERT_EQ(lse_cluster.size(), lse_kernel.size());
    EXPECT_EQ(0, std::memcmp(lse_cluster.data(), lse_kernel.data(), lse_kernel.size() * 4))
        << sc.name;
  }
  if (ran == 0) GTEST_SKIP() << "no cluster merge here: " << why;
  EXPECT_EQ(ran, static_cast<int>(cases.size())) << why;
}

// fp32 output: the merge's other store path, compared with the bf16 run rounded the same way.
TEST_F(CudaLaws, Fp32OutputRoundsToTheBf16Output) {
  VerifyBatch b = VerifyBatch::build(law_spec(33));
  const std::vector<uint16_t> bits = run_bits(b);
  VerifyParams p = b.params();
  std::vector<float> o32(static_cast<size_t>(p.max_total_q) * p.num_heads * kLatentDim,
                         std::numeric_limits<float>::quiet_NaN());
  p.o_lat = o32.data();
  p.o_dtype = DType::F32;
  gpu.run(p);
  const size_t real = static_cast<size_t>(b.real_tokens()) * p.num_heads * kLatentDim;
  for (size_t k = 0; k < real; ++k)
    ASSERT_EQ(float_to_bf16(o32[k]).bits, bits[k]) << "element " << k;
}

// A kernel fault poisons the CUDA context for the whole process: the backend's next run, and
// every one after it, throws BackendLost, as does can_implement (so a property campaign stops at
// the case instead of shrinking it against a dead device). In a child process of its own (a
// death test re-executes the binary, so the child initializes CUDA itself), since no test after
// it could run; not a CudaLaws test, which the sanitizer runs select, since this fault is
// deliberate.
TEST(CudaBackendLostDeathTest, EveryRunAfterAKernelFaultThrowsBackendLost) {
  MLAV_SKIP_WITHOUT_DEVICE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CudaBackend gpu;
        VerifyBatch b = VerifyBatch::build(law_spec(44));
        gpu.run(b.params());  // a live context first
        if (fault_the_context() != cudaErrorIllegalAddress) std::_Exit(3);
        int lost = 0;
        for (int k = 0; k < 2; ++k) {
          try {
            gpu.run(b.params());
          } catch (const BackendLost& e) {
            lost += std::string(e.what()).find("context is lost") != std::string::npos;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "not BackendLost: %s\n", e.what());
          }
        }
        if (lost != 2) std::_Exit(4);
        // can_implement too: BackendLost, not a refusal a campaign would count as a skip.
        try {
          (void)gpu.can_implement(b.params());
          std::_Exit(5);
        } catch (const BackendLost& e) {
          if (std::string(e.what()).find("context is lost") == std::string::npos) std::_Exit(6);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mlaverify::cuda::testing

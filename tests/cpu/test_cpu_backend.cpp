// CpuBackend against the double-precision model within derived bounds, and the laws the kernel's
// algorithm must keep: thread-count, layout, draft-source and mask-format invariance, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/mask.h"
#include "tests/cpu/case_fixture.h"
#include "tests/cpu/error_bound.h"

namespace mlaverify::cpu::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs `backend` on the case and checks every request against the model within its bound.
void expect_matches_model(Case& c, Backend& backend, const std::string& label) {
  c.poison_outputs();
  VerifyParams p = c.params();
  backend.run(p);
  const model::RefResult ref = model::reference_verify(p);
  for (int32_t i = 0; i < c.batch(); ++i) {
    const RequestMagnitudes mag = magnitudes(p, i);
    const ErrorBound bound =
        cpu_error_bound(mag, c.spec().sm_scale, c.spec().num_splits, c.spec().o_dtype);
    // A bound that allows an error of the size of the values themselves would pass anything.
    ASSERT_LT(bound.o_coeff, 0.05) << label << ": the derived bound is not informative";
    ASSERT_LT(bound.lse_abs, 0.01) << label << ": the derived bound is not informative";
    const RequestComparison r = compare_request(p, ref, i, bound, mag);
    if (std::getenv("MLAV_VERBOSE"))
      std::printf("%s request %d: %s\n", label.c_str(), i, r.describe().c_str());
    EXPECT_TRUE(r.ok()) << label << " request " << i << " (P=" << mag.prefix_len
                        << ", D=" << mag.draft_nodes << "): " << r.describe();
  }
}

// Bitwise equality of two cases' outputs over the real rows.
void expect_identical_outputs(const Case& a, const Case& b, const std::string& label) {
  ASSERT_EQ(a.tokens(), b.tokens());
  const int32_t heads = a.spec().heads;
  int64_t differing = 0;
  for (int64_t t = 0; t < a.tokens(); ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      const float la = a.lse(t, h), lb = b.lse(t, h);
      if (std::memcmp(&la, &lb, sizeof la) != 0) ++differing;
      for (int k = 0; k < kLatentDim; ++k) {
        const float oa = a.o(t, h, k), ob = b.o(t, h, k);
        if (std::memcmp(&oa, &ob, sizeof oa) != 0) ++differing;
      }
    }
  }
  EXPECT_EQ(differing, 0) << label;
}

CaseSpec mixed_spec(uint64_t seed) {
  Rng rng(seed);
  CaseSpec spec;
  // Edges on purpose: P = 0, 1, one tile, tile +- 1, several tiles; D = 1, a chain, a star, a
  // random tree wider than one draft tile (70 > kKvTile).
  spec.parents = {random_parents(rng, 5), {-1},
                  random_parents(rng, 3), {-1, 0, 1, 2},
                  {-1, 0, 0, 0, 0, 0},    random_parents(rng, 70)};
  spec.prefix_lens = {0, 1, 63, 64, 65, 130};
  spec.heads = 2;
  spec.seed = seed;
  return spec;
}

TEST(CpuBackend, NameAndWorkspace) {
  CpuBackend backend({.threads = 2});
  EXPECT_EQ(backend.name(), "cpu");
  EXPECT_EQ(CpuBackend({.threads = 1, .folded = true}).name(), "cpu[folded]");
  EXPECT_EQ(backend.threads(), 2);
  EXPECT_FALSE(CpuBackend::faults_compiled_in());
  VerifyParams p;
  p.num_splits = 3;
  p.max_total_q = 10;
  p.num_heads = 4;
  // (3 splits + 1 draft partial) * 10 tokens * 4 heads * (512 + 1) floats.
  EXPECT_EQ(backend.workspace_bytes(p), size_t{4} * 10 * 4 * 513 * 4);
}

TEST(CpuBackend, MatchesModelOnMixedBatch) {
  for (int32_t splits : {1, 2, 5}) {
    CaseSpec spec = mixed_spec(base_seed() + splits);
    spec.num_splits = splits;
    Case c(spec);
    CpuBackend backend({.threads = 2});
    expect_matches_model(c, backend, "splits=" + std::to_string(splits));
  }
}

TEST(CpuBackend, MatchesModelWithFp32StorageAndOutputs) {
  CaseSpec spec = mixed_spec(base_seed() + 11);
  spec.q_dtype = DType::F32;
  spec.kv_dtype = DType::F32;
  spec.o_dtype = DType::F32;
  spec.num_splits = 3;
  Case c(spec);
  CpuBackend backend({.threads = 2});
  expect_matches_model(c, backend, "fp32 storage, bf16-exact values");
  // fp32 values that are not bf16-exact are covered by the law below (read == their bf16
  // rounding, bit for bit) plus this comparison: a worst-case bound against a model that reads
  // them unrounded would be vacuous (score errors of 2^-8 sum|q k| reach ~0.3 at unit scale).
}

TEST(CpuBackend, Fp32StorageIsReadAsItsBf16Rounding) {
  // The kernel rounds fp32 operands to bf16 before the products, so an fp32 pool and query holding
  // arbitrary floats must give bit-for-bit the outputs of bf16 buffers holding their roundings.
  CaseSpec spec = mixed_spec(base_seed() + 12);
  spec.q_dtype = DType::F32;
  spec.kv_dtype = DType::F32;
  spec.f32_values_bf16_exact = false;
  spec.num_splits = 2;
  Case f32_case(spec);
  spec.q_dtype = DType::BF16;
  spec.kv_dtype = DType::BF16;
  Case bf16_case(spec);  // same seed: the same draws, rounded once at store time
  CpuBackend backend({.threads = 2});
  VerifyParams pa = f32_case.params();
  VerifyParams pb = bf16_case.params();
  backend.run(pa);
  backend.run(pb);
  expect_identical_outputs(f32_case, bf16_case, "fp32 vs bf16 storage");
}

// The folded plan (CpuOptions::folded, the wgmma kernel's): the draft tiles join split 0's tile
// sequence and there is no draft partial. Same derived bound (it counts every key and tile of
// the request, and num_splits + 1 partials, more than the folded plan merges).
TEST(CpuBackend, FoldedPlanMatchesModel) {
  for (int32_t splits : {1, 2, 3, 5}) {
    CaseSpec spec = mixed_spec(base_seed() + 40 + splits);
    spec.num_splits = splits;
    Case c(spec);
    CpuBackend backend({.threads = 2, .folded = true});
    expect_matches_model(c, backend, "folded splits=" + std::to_string(splits));
  }
}

// The option is wired: with a draft wider than a tile and a prefix, the folded plan's partials
// hold other keys than the unfolded plan's, so the running maxima (and with them the bf16
// roundings of P) differ and some output bit does (fixed seed: deterministic). And the folded
// run is bit-identical for any thread count, as the unfolded one is.
TEST(CpuBackend, FoldedPlanIsADifferentSumAndThreadCountFree) {
  CaseSpec spec = mixed_spec(base_seed() + 50);
  spec.num_splits = 2;
  Case unfolded(spec), folded(spec), folded3(spec);
  CpuBackend a({.threads = 2}), b({.threads = 2, .folded = true});
  CpuBackend b3({.threads = 3, .folded = true});
  VerifyParams pa = unfolded.params(), pb = folded.params(), pb3 = folded3.params();
  a.run(pa);
  b.run(pb);
  b3.run(pb3);
  int64_t differing = 0;
  for (int64_t t = 0; t < unfolded.tokens(); ++t)
    for (int32_t h = 0; h < spec.heads; ++h)
      for (int k = 0; k < kLatentDim; ++k) differing += unfolded.o(t, h, k) != folded.o(t, h, k);
  EXPECT_GT(differing, 0) << "CpuOptions::folded changed nothing";
  expect_identical_outputs(folded, folded3, "folded, threads 2 vs 3");
}

TEST(CpuBackend, BitIdenticalForAnyThreadCount) {
  CaseSpec spec = mixed_spec(base_seed() + 21);
  spec.num_splits = 4;
  spec.heads = 3;
  Case reference_case(spec);
  CpuBackend one({.threads = 1});
  VerifyParams p1 = reference_case.params();
  one.run(p1);
  for (int threads : {2, 3, 8}) {
    Case c(spec);
    CpuBackend backend({.threads = threads});
    VerifyParams p = c.params();
    backend.run(p);
    expect_identical_outputs(reference_case, c, "threads=" + std::to_string(threads));
    EXPECT_EQ(std::memcmp(reference_case.lse_values().data(), c.lse_values().data(),
                          c.lse_values().size() * sizeof(float)),
              0);
  }
}

TEST(CpuBackend, SplitCountInvarianceWithinDerivedBound) {
  // Two split counts run the same arithmetic on different chunks, so each is within its own bound
  // of the model and, by the triangle inequality, within the sum of both bounds of each other.
  CaseSpec spec = mixed_spec(base_seed() + 31);
  spec.prefix_lens = {0, 1, 200, 64, 513, 130};
  Case one_split(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams p1 = one_split.params();
  backend.run(p1);
  for (int32_t splits : {2, 3, 7, kMaxSplits}) {
    CaseSpec s = spec;
    s.num_splits = splits;
    Case c(s);
    VerifyParams p = c.params();
    backend.run(p);
    int64_t q_begin = 0;
    for (int32_t i = 0; i < c.batch(); ++i) {
      const RequestMagnitudes mag = magnitudes(p, i);
      const ErrorBound b1 = cpu_error_bound(mag, spec.sm_scale, 1, spec.o_dtype);
      const ErrorBound bk = cpu_error_bound(mag, spec.sm_scale, splits, spec.o_dtype);
      const int64_t q_end = q_begin + static_cast<int64_t>(spec.parents[i].size());
      for (int64_t t = q_begin; t < q_end; ++t) {
        for (int32_t h = 0; h < spec.heads; ++h) {
          EXPECT_LE(std::fabs(double(c.lse(t, h)) - one_split.lse(t, h)), b1.lse_abs + bk.lse_abs)
              << "splits=" << splits << " token " << t << " head " << h;
          for (int k = 0; k < kLatentDim; ++k) {
            ASSERT_LE(std::fabs(double(c.o(t, h, k)) - one_split.o(t, h, k)),
                      (b1.o_coeff + bk.o_coeff) * mag.v_max[k])
                << "splits=" << splits << " token " << t << " head " << h << " column " << k;
          }
        }
      }
      q_begin = q_end;
    }
  }
}

TEST(CpuBackend, LayoutsAndQueryOffsetsGiveIdenticalOutputs) {
  // The layout only changes addresses: the same logical values must give the same bits.
  CaseSpec spec = mixed_spec(base_seed() + 41);
  spec.num_splits = 2;
  Case base(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams pb = base.params();
  backend.run(pb);
  struct Variant {
    std::string name;
    PoolLayout layout;
    bool query_rope_first;
    int64_t q_head_stride;
  };
  for (const Variant& v : {Variant{"padded rows (stride 640)", PoolLayout::Padded640, false, 576},
                           Variant{"rope-first storage", PoolLayout::RopeFirstStored, false, 576},
                           Variant{"split views", PoolLayout::SplitViews, false, 576},
                           Variant{"rope-first query rows", PoolLayout::LatentFirst, true, 576},
                           Variant{"padded query heads", PoolLayout::LatentFirst, false, 600}}) {
    CaseSpec s = spec;
    s.layout = v.layout;
    s.query_rope_first = v.query_rope_first;
    s.q_head_stride = v.q_head_stride;
    Case c(s);
    VerifyParams p = c.params();
    backend.run(p);
    expect_identical_outputs(base, c, v.name);
  }
}

TEST(CpuBackend, ReadingLatentFirstPoolAsRopeFirstChangesOutputs) {
  // The converse, so the identity above is not vacuous: a wrong reading must show.
  CaseSpec spec = mixed_spec(base_seed() + 42);
  Case right(spec), wrong(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams pr = right.params();
  backend.run(pr);
  VerifyParams pw = wrong.params();
  pw.kv_layout = KvLayout::rope_first();
  backend.run(pw);
  int64_t differing = 0;
  for (int64_t t = 0; t < right.tokens(); ++t) {
    for (int k = 0; k < kLatentDim; ++k) differing += right.o(t, 0, k) != wrong.o(t, 0, k);
  }
  EXPECT_GT(differing, right.tokens() * kLatentDim / 2);
}

TEST(CpuBackend, DraftSourcesGiveIdenticalOutputs) {
  CaseSpec spec = mixed_spec(base_seed() + 51);
  spec.num_splits = 3;
  Case extend_rows(spec);
  spec.draft_source = DraftKvSource::CacheSlots;
  Case cache_slots(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams pe = extend_rows.params();
  VerifyParams pc = cache_slots.params();
  backend.run(pe);
  backend.run(pc);
  expect_identical_outputs(extend_rows, cache_slots, "ExtendRows vs CacheSlots");
  expect_matches_model(cache_slots, backend, "CacheSlots");
}

TEST(CpuBackend, MaskFormatsGiveIdenticalOutputs) {
  Rng rng(base_seed() + 61);
  CaseSpec spec;
  // D <= 32 so that QlenOnlyBitpacking applies too.
  spec.parents = {random_parents(rng, 7), {-1}, random_parents(rng, 32), {-1, 0, 1}};
  spec.prefix_lens = {65, 0, 3, 128};
  spec.seed = base_seed() + 61;
  Case full(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams pf = full.params();
  backend.run(pf);
  for (MaskFormat f : {MaskFormat::QlenOnly, MaskFormat::QlenOnlyBitpacking,
                       MaskFormat::FlashInferPacked, MaskFormat::DraftBits}) {
    for (IndptrConvention conv : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
      CaseSpec s = spec;
      s.mask_format = f;
      s.mask_indptr_convention = conv;
      Case c(s);
      VerifyParams p = c.params();
      backend.run(p);
      expect_identical_outputs(full, c, "mask format " + std::to_string(static_cast<int>(f)));
    }
  }
}

TEST(CpuBackend, FullyMaskedRowGivesZerosAndMinusInfinity) {
  // P = 0 and a FullMask row with no visible draft column: the row sees no key at all.
  CaseSpec spec;
  spec.parents = {{-1, 0, 0, 1}, {-1, 0}};
  spec.prefix_lens = {0, 5};
  spec.num_splits = 3;
  spec.seed = base_seed() + 71;
  Case c(spec);
  // Request 0 is first in the FullMask buffer: row t = 2 is bytes [2 * 4, 3 * 4) (P_0 = 0).
  for (int j = 0; j < 4; ++j) c.mask().data[2 * 4 + j] = 0;
  CpuBackend backend({.threads = 2});
  expect_matches_model(c, backend, "fully masked row");  // also checks the masked row exactly
  for (int32_t h = 0; h < spec.heads; ++h) {
    EXPECT_EQ(c.lse(2, h), -kInf);
    for (int k = 0; k < kLatentDim; ++k) {
      ASSERT_EQ(c.o(2, h, k), 0.f);
      ASSERT_FALSE(std::signbit(c.o(2, h, k)));
    }
    EXPECT_TRUE(std::isfinite(c.lse(3, h)));  // its child still sees itself and the root
  }
}

TEST(CpuBackend, ReadsOnlyNamedSlotsAndWritesOnlyRealRows) {
  // The fixture NaN-poisons every slot the metadata does not name and the query rows beyond T; a
  // single stray read would put a NaN into the outputs. Rows beyond T must stay as poisoned.
  CaseSpec spec = mixed_spec(base_seed() + 81);
  spec.extra_q_rows = 5;
  spec.num_splits = 4;
  Case c(spec);
  CpuBackend backend({.threads = 2});
  VerifyParams p = c.params();
  backend.run(p);
  for (int64_t t = 0; t < c.tokens(); ++t) {
    for (int32_t h = 0; h < spec.heads; ++h) {
      ASSERT_FALSE(std::isnan(c.lse(t, h))) << "token " << t;
      for (int k = 0; k < kLatentDim; ++k) ASSERT_FALSE(std::isnan(c.o(t, h, k)));
    }
  }
  for (int64_t t = c.tokens(); t < c.max_total_q(); ++t) {
    for (int32_t h = 0; h < spec.heads; ++h) {
      EXPECT_TRUE(std::isnan(c.lse(t, h))) << "row " << t << " beyond T was written";
      for (int k = 0; k < kLatentDim; ++k) ASSERT_TRUE(std::isnan(c.o(t, h, k)));
    }
  }
}

TEST(CpuBackend, ChainOfOneWithEmptyPrefixIsTheRootRow) {
  // D = 1, P = 0: the only key is the root's own row, so the softmax weight is exactly 1,
  // o = bf16(c_root) exactly (p = exp(0) = 1 is exact in bf16, 1 * v exact, / 1 exact), and
  // lse = s_root. Worked by hand, independent of the model.
  CaseSpec spec;
  spec.parents = {{-1}};
  spec.prefix_lens = {0};
  spec.heads = 1;
  spec.seed = base_seed() + 91;
  Case c(spec);
  CpuBackend backend({.threads = 1});
  VerifyParams p = c.params();
  backend.run(p);
  const std::vector<float>& root = c.key_row(0, 0);
  for (int k = 0; k < kLatentDim; ++k) ASSERT_EQ(c.o(0, 0, k), root[k]) << "column " << k;
  double dot = 0, abs_dot = 0;
  for (int k = 0; k < kRowDim; ++k) {
    dot += double(c.query_row(0, 0)[k]) * root[k];
    abs_dot += std::fabs(double(c.query_row(0, 0)[k]) * root[k]);
  }
  // lse = m + log(1) = m exactly, and m = fl(sm_scale * d~) with |d~ - d| <= gamma_41 sum|q k|
  // (the CPU's dot order, error_bound.h), so |m - s| <= sm_scale gamma_41 A (1 + u) + u |s|
  // where A = sum|q_k k_k|.
  const double s = spec.sm_scale * dot;
  const double bound = spec.sm_scale * abs_dot * gamma_n(41) * (1 + kU) + kU * std::fabs(s);
  EXPECT_NEAR(c.lse(0, 0), s, bound);
}

// ---- bad input: validation runs before any work, names field and index, writes nothing ----

void expect_invalid(Case& c, const VerifyParams& p, const std::string& field, int64_t index) {
  CpuBackend backend({.threads = 2});
  c.poison_outputs();
  try {
    backend.run(p);
    ADD_FAILURE() << "expected InvalidInput on " << field;
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_EQ(e.index(), index) << e.what();
  }
  for (float v : c.lse_values()) ASSERT_TRUE(std::isnan(v)) << "an output was written";
}

TEST(CpuBackendInput, SlotOutsidePoolIsRejected) {
  Case c(mixed_spec(base_seed() + 101));
  c.kv_indices()[3] = c.pool().num_slots();  // one past the last slot
  expect_invalid(c, c.params(), "kv_indices", 3);
}

TEST(CpuBackendInput, DecreasingQoIndptrIsRejected) {
  Case c(mixed_spec(base_seed() + 102));
  c.qo_indptr()[2] = c.qo_indptr()[1] - 1;
  VerifyParams p = c.params();
  try {
    CpuBackend({.threads = 1}).run(p);
    ADD_FAILURE() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "qo_indptr") << e.what();
  }
}

TEST(CpuBackendInput, MaskIndptrWithWrongSegmentIsRejected) {
  // docs/spec.md §7.1/§7.5: a FullMask indptr whose segment no longer matches D_i * (P_i + D_i) (as
  // when one request's offsets come from a stale or re-sliced buffer) is refused before any read.
  Case c(mixed_spec(base_seed() + 103));
  c.mask().indptr[2] += 1;
  VerifyParams p = c.params();
  CpuBackend backend({.threads = 1});
  c.poison_outputs();
  try {
    backend.run(p);
    ADD_FAILURE() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "mask_indptr") << e.what();
  }
  for (float v : c.lse_values()) ASSERT_TRUE(std::isnan(v)) << "an output was written";
}

TEST(CpuBackendInput, ZeroSplitsIsRejected) {
  Case c(mixed_spec(base_seed() + 104));
  VerifyParams p = c.params();
  p.num_splits = 0;
  expect_invalid(c, p, "num_splits", -1);
}

TEST(CpuBackendSupport, CanImplementGivesReasons) {
  Case c(mixed_spec(base_seed() + 111));
  VerifyParams p = c.params();
  CpuBackend backend({.threads = 1});
  EXPECT_TRUE(backend.can_implement(p));
  VerifyParams big = p;
  big.max_draft = 1025;
  Support s = backend.can_implement(big);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("1024"), std::string::npos) << s.reason;
  VerifyParams bad_dtype = p;
  bad_dtype.kv_dtype = static_cast<DType>(7);
  s = backend.can_implement(bad_dtype);
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("kv_dtype"), std::string::npos) << s.reason;
}

TEST(CpuBackendSupport, FaultsAreCompiledOutOfTheNormalBuild) {
  Case c(mixed_spec(base_seed() + 112));
  VerifyParams p = c.params();
  for (CpuFault f : kAllCpuFaults) {
    CpuBackend backend({.threads = 1, .fault = f});
    Support s = backend.can_implement(p);
    EXPECT_FALSE(s) << fault_name(f);
    EXPECT_NE(s.reason.find("mlaverify_cpu_faults"), std::string::npos) << s.reason;
    EXPECT_THROW(backend.run(p), Unsupported) << fault_name(f);
  }
}

}  // namespace
}  // namespace mlaverify::cpu::testing

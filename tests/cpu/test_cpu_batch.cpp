// CpuBackend on batches from model::VerifyBatch (SGLang metadata, paging, slot orders, graph
// padding): within derived bounds of the model, and bit-identical wherever only storage changes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/attention.h"
#include "model/batch.h"
#include "tests/cpu/case_fixture.h"
#include "tests/cpu/error_bound.h"

namespace mlaverify::cpu::testing {
namespace {

using model::BatchSpec;
using model::DraftTree;
using model::VerifyBatch;

BatchSpec base_spec(uint64_t seed) {
  Rng rng(seed);
  BatchSpec spec;
  // SGLang runs one D per batch; P covers 0, 1, tile edges and several tiles.
  const int32_t d = 6;
  for (int64_t prefix : {int64_t{0}, int64_t{1}, int64_t{64}, int64_t{65}, int64_t{190}}) {
    spec.requests.push_back({DraftTree::from_parents(random_parents(rng, d)), prefix});
  }
  spec.num_heads = 2;
  spec.num_splits = 3;
  spec.seed = seed;
  return spec;
}

void run_and_check(VerifyBatch& batch, const std::string& label) {
  batch.poison_outputs();
  VerifyParams p = batch.params();
  CpuBackend backend({.threads = 2});
  backend.run(p);
  const model::RefResult ref = model::reference_verify(p);
  // Padded rows are requests like any other here (P = 1, slot 0, garbage mask bytes): the model
  // defines their output too, and it must be finite or exactly fully masked.
  for (int32_t i = 0; i < p.batch_size; ++i) {
    const RequestMagnitudes mag = magnitudes(p, i);
    const ErrorBound bound = cpu_error_bound(mag, p.sm_scale, p.num_splits, p.o_dtype);
    ASSERT_LT(bound.o_coeff, 0.05) << label << ": the derived bound is not informative";
    const RequestComparison r = compare_request(p, ref, i, bound, mag);
    EXPECT_TRUE(r.ok()) << label << " request " << i << ": " << r.describe();
  }
}

// Bitwise equality of the first `tokens` rows of two batches' outputs.
int64_t differing_outputs(const VerifyBatch& a, const VerifyBatch& b, int64_t tokens,
                          int32_t heads) {
  int64_t differing = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      const float la = a.lse_value(t, h), lb = b.lse_value(t, h);
      differing += std::memcmp(&la, &lb, sizeof la) != 0;
      for (int32_t k = 0; k < kLatentDim; ++k) {
        const float oa = a.o_lat_value(t, h, k), ob = b.o_lat_value(t, h, k);
        differing += std::memcmp(&oa, &ob, sizeof oa) != 0;
      }
    }
  }
  return differing;
}

void run(VerifyBatch& batch, int threads = 2) {
  batch.poison_outputs();
  VerifyParams p = batch.params();
  CpuBackend({.threads = threads}).run(p);
}

TEST(CpuBackendBatch, MatchesModelAcrossStorageChoices) {
  struct Variant {
    std::string name;
    LayoutKind layout;
    int64_t row_stride;
    int32_t page_size;
    DraftKvSource source;
    MaskFormat mask;
    DType kv_dtype;
  };
  const std::vector<Variant> variants = {
      {"latent-first", LayoutKind::LatentFirst, 576, 1, DraftKvSource::ExtendRows,
       MaskFormat::FullMask, DType::BF16},
      {"rope-first padded rows, paged 16, cache slots", LayoutKind::RopeFirst, 640, 16,
       DraftKvSource::CacheSlots, MaskFormat::QlenOnly, DType::BF16},
      {"split views, FlashInfer mask", LayoutKind::Split, 576, 1, DraftKvSource::CacheSlots,
       MaskFormat::FlashInferPacked, DType::BF16},
      {"fp32 pool, DraftBits, paged 64", LayoutKind::LatentFirst, 576, 64,
       DraftKvSource::ExtendRows, MaskFormat::DraftBits, DType::F32},
  };
  BatchSpec base = base_spec(base_seed() + 201);
  VerifyBatch reference = VerifyBatch::build(base);
  run(reference);
  for (const Variant& v : variants) {
    BatchSpec spec = base;
    spec.layout.kind = v.layout;
    spec.row_stride = v.row_stride;
    spec.page_size = v.page_size;
    spec.draft_source = v.source;
    spec.mask_format = v.mask;
    spec.kv_dtype = v.kv_dtype;
    VerifyBatch batch = VerifyBatch::build(spec);
    run_and_check(batch, v.name);
    // Same logical values (batch.h), only storage differs: the same bits.
    EXPECT_EQ(differing_outputs(reference, batch, batch.real_tokens(), spec.num_heads), 0)
        << v.name;
  }
}

TEST(CpuBackendBatch, GraphPaddingChangesNoRealBit) {
  // docs/spec.md §3 / §7.10: padded rows (P = 1, request row 0, slot 0, stale garbage mask bytes)
  // must not fault, leak NaN, or change a real row's output by a single bit.
  BatchSpec spec = base_spec(base_seed() + 202);
  VerifyBatch unpadded = VerifyBatch::build(spec);
  run(unpadded);
  for (int32_t padded_bs : {6, 8, 13}) {
    BatchSpec s = spec;
    s.graph_padded_bs = padded_bs;
    VerifyBatch padded = VerifyBatch::build(s);
    ASSERT_EQ(padded.batch_size(), padded_bs);
    run_and_check(padded, "graph padded to " + std::to_string(padded_bs));
    EXPECT_EQ(differing_outputs(unpadded, padded, unpadded.real_tokens(), spec.num_heads), 0)
        << "padded to " << padded_bs;
    for (int64_t t = padded.real_tokens(); t < padded.total_tokens(); ++t) {
      for (int32_t h = 0; h < spec.num_heads; ++h) {
        EXPECT_FALSE(std::isnan(padded.lse_value(t, h))) << "padded row " << t;
      }
    }
  }
}

TEST(CpuBackendBatch, SlotOrderAndThreadsChangeNoBit) {
  BatchSpec spec = base_spec(base_seed() + 203);
  VerifyBatch scattered = VerifyBatch::build(spec);
  run(scattered, 1);
  spec.slot_order = BatchSpec::SlotOrder::Contiguous;
  VerifyBatch contiguous = VerifyBatch::build(spec);
  run(contiguous, 3);
  EXPECT_EQ(differing_outputs(scattered, contiguous, scattered.real_tokens(), spec.num_heads), 0);
}

TEST(CpuBackendBatch, LargeTreeOverSeveralDraftTiles) {
  // D = 300 (five draft tiles, a partial last one) with a short prefix: the draft partial's own
  // tiling and rescaling carry the whole row.
  Rng rng(base_seed() + 204);
  BatchSpec spec;
  spec.requests.push_back({DraftTree::from_parents(random_parents(rng, 300)), 3});
  spec.num_heads = 1;
  spec.num_splits = 2;
  spec.seed = base_seed() + 204;
  VerifyBatch batch = VerifyBatch::build(spec);
  run_and_check(batch, "D = 300");
}

TEST(CpuBackendBatch, LargestSupportedTree) {
  // D = 1024, the most can_implement accepts: sixteen draft tiles and a 1 MB visibility block.
  Rng rng(base_seed() + 205);
  BatchSpec spec;
  spec.requests.push_back({DraftTree::from_parents(random_parents(rng, 1024)), 0});
  spec.num_heads = 1;
  spec.mask_format = MaskFormat::DraftBits;
  spec.seed = base_seed() + 205;
  VerifyBatch batch = VerifyBatch::build(spec);
  EXPECT_TRUE(CpuBackend({.threads = 1}).can_implement(batch.params()));
  run_and_check(batch, "D = 1024");
}

}  // namespace
}  // namespace mlaverify::cpu::testing

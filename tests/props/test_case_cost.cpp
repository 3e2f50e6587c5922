// estimate_cost: what a case will cost is said before it is built, and it is a bound: the
// buffers a built batch actually holds never exceed it, and it is not wildly above them either.
#include <gtest/gtest.h>

#include "props/case.h"

namespace mlaverify::props {
namespace {

int64_t held_bytes(model::VerifyBatch& b) {
  const model::KvPool& pool = b.pool();
  const int64_t kv_bytes = pool.dtype() == DType::BF16 ? 2 : 4;
  return pool.storage_elements() * kv_bytes + static_cast<int64_t>(b.q().size()) * 2 +
         static_cast<int64_t>(b.k_extend().size()) +
         static_cast<int64_t>(b.mask().data.size()) + static_cast<int64_t>(b.o_lat().size()) * 2 +
         static_cast<int64_t>(b.lse().size()) * 4;
}

TEST(CaseCost, BoundsTheBuiltBatch) {
  std::vector<Case> cases(4);
  cases[0].requests = {{{-1, 0, 1}, 65}, {{-1}, 0}};
  cases[1].requests = {{{-1, 0, 0, 1, 1, 2, 2, 3}, 4000}};
  cases[1].num_heads = 16;
  cases[1].row_stride = 640;
  cases[2].requests = {{{-1, 0}, 200}, {{-1, 0}, 33}};
  cases[2].graph_padded_bs = 4;
  cases[2].page_size = 16;
  cases[3].requests = {{{-1}, 1}};
  cases[3].kv_dtype = DType::F32;
  for (const Case& c : cases) {
    model::VerifyBatch b = build_batch(c);
    const CaseCost cost = estimate_cost(c);
    const int64_t held = held_bytes(b);
    // The batch's own buffers: at least what it holds, and at most a third more (the spare
    // pages are counted at their maximum, max(4, used / 8) + the sink page).
    EXPECT_GE(cost.batch_bytes, held) << scenarios::summary(c);
    EXPECT_LE(cost.batch_bytes, held * 4 / 3 + 65536) << scenarios::summary(c);
    EXPECT_GT(cost.model_bytes, 0);
    EXPECT_GT(cost.flops, 0);
  }
}

// The loader's limits admit cases that need gigabytes: the estimate sees it before anything is
// allocated (the ~4.5 GB the issue names is a pool of 4M tokens of 576 bf16).
TEST(CaseCost, SeesTheLargestLegalCase) {
  Case c;
  for (int i = 0; i < 4; ++i) c.requests.push_back({{-1}, scenarios::kMaxScenarioPrefix - 1});
  const CaseCost cost = estimate_cost(c);
  EXPECT_GT(cost.bytes, int64_t{4} << 30);
}

}  // namespace
}  // namespace mlaverify::props

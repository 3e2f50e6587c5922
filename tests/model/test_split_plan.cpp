// Tests of include/mlaverify/split_plan.h: both plans cover every key exactly once, in whole
// tiles, and the folded plan's splits are as even as whole tiles allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mlaverify/split_plan.h"

namespace mlaverify {
namespace {

// Tiles a key range [begin, end) spans; 0 when empty.
int64_t tiles_of(int64_t begin, int64_t end) {
  return end > begin ? ceil_div(end - begin, kKvTile) : 0;
}

// Walks the splits of one (P, D, NSPLIT): draft and prefix ranges in order, gap-free, starting
// on tile boundaries, draft tiles before prefix tiles in a split, at most ceil(total / NSPLIT)
// tiles per split, and the largest split exactly that (no plan does better in whole tiles).
void check_folded(int64_t P, int64_t D, int32_t ns) {
  SCOPED_TRACE(::testing::Message() << "P " << P << " D " << D << " NSPLIT " << ns);
  const int64_t total = ceil_div(D, kKvTile) + ceil_div(P, kKvTile);
  const int64_t chunk = ceil_div(total, ns);
  int64_t draft_at = 0, prefix_at = 0, largest = 0;
  for (int32_t s = 0; s < ns; ++s) {
    const FoldedRange r = folded_range(P, D, ns, s);
    ASSERT_EQ(r.draft_begin, draft_at) << "split " << s;
    ASSERT_EQ(r.prefix_begin, prefix_at) << "split " << s;
    ASSERT_LE(r.draft_begin, r.draft_end);
    ASSERT_LE(r.prefix_begin, r.prefix_end);
    if (r.draft_keys() > 0) {
      ASSERT_EQ(r.draft_begin % kKvTile, 0);
      // Prefix keys in a split only once its draft keys reach the end of the draft.
      if (r.prefix_keys() > 0) {
        ASSERT_EQ(r.draft_end, D);
      }
    }
    if (r.prefix_keys() > 0) {
      ASSERT_EQ(r.prefix_begin % kKvTile, 0);
    }
    const int64_t tiles = tiles_of(r.draft_begin, r.draft_end) +
                          tiles_of(r.prefix_begin, r.prefix_end);
    ASSERT_LE(tiles, chunk) << "split " << s;
    ASSERT_EQ(r.empty(), tiles == 0);
    largest = std::max(largest, tiles);
    draft_at = r.draft_end;
    prefix_at = r.prefix_end;
  }
  EXPECT_EQ(draft_at, D);
  EXPECT_EQ(prefix_at, P);
  EXPECT_EQ(largest, chunk);
  // The non-empty splits are exactly the first folded_nonempty_splits.
  const int32_t n = folded_nonempty_splits(P, D, ns);
  for (int32_t s = 0; s < ns; ++s) EXPECT_EQ(folded_range(P, D, ns, s).empty(), s >= n) << s;
}

TEST(SplitPlan, FoldedCoversEveryKeyOnceInEvenWholeTiles) {
  for (int64_t P : {0, 1, 63, 64, 65, 640, 8192, 8200})
    for (int64_t D : {1, 4, 63, 64, 65, 128, 200, 1024})
      for (int32_t ns : {1, 2, 3, 4, 7, 16, 64}) check_folded(P, D, ns);
}

TEST(SplitPlan, FoldedOnTheBenchmarkShapes) {
  // docs/spec.md §8 k2-tp8-ddtree128 with the 2 splits suggest_num_splits picks on 132 SMs: 2 draft
  // tiles + 128 prefix tiles = 130, 65 per split; the draft goes first, in split 0.
  FoldedRange a = folded_range(8192, 128, 2, 0), b = folded_range(8192, 128, 2, 1);
  EXPECT_EQ(a.draft_begin, 0);
  EXPECT_EQ(a.draft_end, 128);
  EXPECT_EQ(a.prefix_begin, 0);
  EXPECT_EQ(a.prefix_end, 63 * 64);
  EXPECT_EQ(b.draft_keys(), 0);
  EXPECT_EQ(b.prefix_begin, 63 * 64);
  EXPECT_EQ(b.prefix_end, 8192);
  // A draft longer than a split: D = 1024 is 16 tiles, P = 128 is 2; 4 splits of ceil(18 / 4)
  // = 5 tiles: drafts [0, 320), [320, 640), [640, 960), then [960, 1024) and the whole prefix.
  FoldedRange last = folded_range(128, 1024, 4, 3);
  EXPECT_EQ(folded_range(128, 1024, 4, 1).draft_begin, 320);
  EXPECT_EQ(last.draft_begin, 960);
  EXPECT_EQ(last.draft_end, 1024);
  EXPECT_EQ(last.prefix_begin, 0);
  EXPECT_EQ(last.prefix_end, 128);
  // P = 0: the draft alone, in split 0; the other splits are empty.
  EXPECT_EQ(folded_range(0, 16, 4, 0).draft_end, 16);
  EXPECT_TRUE(folded_range(0, 16, 4, 1).empty());
}

TEST(SplitPlan, PrefixSplitsCoverThePrefixOnceFromTheFront) {
  for (int64_t P : {0, 1, 63, 64, 65, 8192, 8200})
    for (int32_t ns : {1, 2, 3, 7, 64}) {
      int64_t at = 0;
      for (int32_t s = 0; s < ns; ++s) {
        const SplitRange r = split_range(P, ns, s);
        ASSERT_EQ(r.begin, at) << "P " << P << " NSPLIT " << ns << " split " << s;
        ASSERT_LE(r.begin, r.end);
        at = r.end;
      }
      EXPECT_EQ(at, P) << "P " << P << " NSPLIT " << ns;
      const int32_t n = nonempty_splits(P, ns);
      for (int32_t s = 0; s < ns; ++s) EXPECT_EQ(split_range(P, ns, s).empty(), s >= n) << s;
    }
}

// The balanced plan (issue 13) on a batch given as (tiles, row tiles) per request.
struct PlanReq {
  int64_t tiles, row_tiles;
};
int64_t chunk_of(const std::vector<PlanReq>& b, int32_t cap, int32_t blocks) {
  return plan_chunk_serial(
      static_cast<int32_t>(b.size()), cap, blocks, [&](int32_t i) { return b[i].tiles; },
      [&](int32_t i) { return b[i].row_tiles; });
}

// Equal requests: the split count of the uniform plan that fills one wave (suggest_num_splits'
// floor(blocks / (bs * row tiles))), evened out, for every docs/spec.md §8 shape on 132 SMs.
TEST(SplitPlan, BalancedPlanOfEqualRequestsIsTheUniformWave) {
  struct Shape {
    int64_t bs, row_tiles, tiles;
    int32_t want;
  };
  for (const Shape& s : {Shape{16, 2, 128, 4}, Shape{8, 8, 256, 2}, Shape{32, 1, 64, 4},
                         Shape{4, 16, 128, 2}, Shape{4, 16, 64, 2}, Shape{2, 4, 1024, 16}}) {
    std::vector<PlanReq> b(s.bs, PlanReq{s.tiles, s.row_tiles});
    const int64_t c = chunk_of(b, kMaxSplits, 132);
    EXPECT_EQ(planned_splits(s.tiles, c, kMaxSplits), s.want) << s.bs << " x " << s.tiles;
    EXPECT_EQ(planned_splits(s.tiles, c, kMaxSplits), nonempty_splits(s.tiles * kKvTile, s.want));
  }
}

// Mixed lengths: the long request spreads over the free blocks, short ones keep one split, the
// big blocks fit the wave, every split count is within [1, cap] (0 without tiles), and the
// units stay within the bound the kernel's grid is sized by (blocks + one per row tile).
TEST(SplitPlan, BalancedPlanSpreadsTheLongRequest) {
  // The example: P = 30,000 and 200 with 32 row tiles each, 132 blocks: 4 splits.
  std::vector<PlanReq> b = {{ceil_div(30000, kKvTile), 32}, {ceil_div(200, kKvTile), 32}};
  int64_t c = chunk_of(b, kMaxSplits, 132);
  EXPECT_EQ(planned_splits(b[0].tiles, c, kMaxSplits), 4);
  EXPECT_EQ(planned_splits(b[1].tiles, c, kMaxSplits), 1);
  // P = 0, 1 and 4097, 4 row tiles each: the long one in splits of >= kMinSplitTiles.
  b = {{0, 4}, {1, 4}, {ceil_div(4097, kKvTile), 4}};
  c = chunk_of(b, kMaxSplits, 132);
  EXPECT_EQ(c, kMinSplitTiles);
  EXPECT_EQ(planned_splits(0, c, kMaxSplits), 0);
  EXPECT_EQ(planned_splits(1, c, kMaxSplits), 1);
  EXPECT_EQ(planned_splits(65, c, kMaxSplits), ceil_div(65, ceil_div(65, ceil_div(65, c))));
  EXPECT_EQ(planned_splits(65, c, 8), 8);  // capped by num_splits
  // Random batches: the invariants.
  uint64_t x = 12345;
  auto next = [&](int64_t n) { x = x * 6364136223846793005ull + 1442695040888963407ull;
                               return static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(n)); };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t bs = 1 + next(40);
    const int32_t blocks = static_cast<int32_t>(1 + next(300));
    const int32_t cap = static_cast<int32_t>(1 + next(kMaxSplits));
    std::vector<PlanReq> r;
    int64_t row_tiles = 0;
    for (int64_t i = 0; i < bs; ++i) {
      r.push_back({next(4) == 0 ? next(3) : next(2000), 1 + next(8)});
      row_tiles += r.back().row_tiles;
    }
    c = chunk_of(r, cap, blocks);
    int64_t big = 0, units = 0;
    for (const PlanReq& q : r) {
      const int32_t n = planned_splits(q.tiles, c, cap);
      ASSERT_EQ(n == 0, q.tiles == 0);
      ASSERT_LE(n, cap);
      ASSERT_EQ(n, q.tiles > 0 ? nonempty_splits(q.tiles * kKvTile, n) : 0);
      big += plan_big_blocks(q.tiles, q.row_tiles, c, cap);
      units += q.row_tiles * n;
    }
    int64_t max_tiles = 0;
    for (const PlanReq& q : r) max_tiles = std::max(max_tiles, q.tiles);
    if (c < std::max<int64_t>(max_tiles, kMinSplitTiles)) {
      ASSERT_LE(big, blocks);
    }
    ASSERT_LE(units, blocks + row_tiles);
  }
}

// The even share first, then the wave chunk: when lo = max(kMinSplitTiles, ceil(work / blocks))
// fits the wave, the chunk is lo after one probe of big_blocks (the planning kernel's pass over
// the batch). Of the spec shapes above on 132 blocks, three divide into the wave at lo (16 x 2 x
// 128: lo 32, 4 splits; 32 x 1 x 64: lo 16, 4 splits; 4 x 16 x 64: lo 32, 2 splits). The other
// three do not (8 x 8 x 256: lo 125 gives 3 splits, 192 big blocks), and their wave chunk (the
// uniform plan's: 256 / floor(132 / 64) = 128; 4 x 16 x 128: 128 / 2 = 64; 2 x 4 x 1024: 1024 /
// 16 = 64) bounds the search unprobed, since it always fits (checked on every random batch
// below): 8 x 8 x 256 probes 125 and 127 (2 probes), the other two only lo, as their wave chunk
// is lo + 1. The plain search takes 6-7 probes on the first three and returns a larger chunk
// than lo on some random batches where lo fits (the sum is not monotone; 11 of the 605 such
// batches below), the search without the wave bound takes 8, 8 and 11 on the last three, and
// v24's search, which probed the wave chunk, 3, 2 and 2: each of those fails a check below.
TEST(SplitPlan, BalancedPlanTakesTheEvenShareWhenItFits) {
  auto plan = [](const std::vector<PlanReq>& b, int32_t cap, int32_t blocks, int* probes) {
    int32_t max_tiles = 0;
    int64_t work = 0, busy = 0;
    for (const PlanReq& q : b) {
      max_tiles = std::max<int32_t>(max_tiles, static_cast<int32_t>(q.tiles));
      work += q.tiles * q.row_tiles;
      busy += q.tiles > 0 ? q.row_tiles : 0;
    }
    return plan_chunk(work, max_tiles, busy, blocks, [&](int32_t c) {
      ++*probes;
      int64_t big = 0;
      for (const PlanReq& q : b)
        big += plan_big_blocks(static_cast<int32_t>(q.tiles), static_cast<int32_t>(q.row_tiles),
                               c, cap);
      return big;
    });
  };
  struct Shape {
    int64_t bs, row_tiles, tiles, chunk;
    int probes;
  };
  for (const Shape& s : {Shape{16, 2, 128, 32, 1}, Shape{32, 1, 64, 16, 1}, Shape{4, 16, 64, 32, 1},
                         Shape{8, 8, 256, 128, 2}, Shape{4, 16, 128, 64, 1},
                         Shape{2, 4, 1024, 64, 1}}) {
    int probes = 0;
    const int32_t c = plan(std::vector<PlanReq>(s.bs, PlanReq{s.tiles, s.row_tiles}), kMaxSplits,
                           132, &probes);
    EXPECT_EQ(c, s.chunk) << s.bs << " x " << s.tiles;
    EXPECT_EQ(probes, s.probes) << s.bs << " x " << s.tiles;
  }
  uint64_t x = 777;
  auto next = [&](int64_t n) { x = x * 6364136223846793005ull + 1442695040888963407ull;
                               return static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(n)); };
  int lo_fits = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t blocks = static_cast<int32_t>(1 + next(300));
    const int32_t cap = static_cast<int32_t>(1 + next(kMaxSplits));
    std::vector<PlanReq> b(1 + next(40));
    int64_t work = 0, max_tiles = 0;
    const bool equal = trial % 4 == 0;  // a batch of equal requests
    const PlanReq one = {1 + next(2000), 1 + next(8)};
    for (PlanReq& q : b) {
      q = equal ? one : PlanReq{next(4) == 0 ? next(3) : next(2000), 1 + next(8)};
      work += q.tiles * q.row_tiles;
      max_tiles = std::max(max_tiles, q.tiles);
    }
    const int64_t lo = std::min<int64_t>(std::max<int64_t>(kMinSplitTiles, ceil_div(work, blocks)),
                                         std::max<int64_t>(max_tiles, kMinSplitTiles));
    int64_t big_lo = 0;
    for (const PlanReq& q : b)
      big_lo += plan_big_blocks(static_cast<int32_t>(q.tiles), static_cast<int32_t>(q.row_tiles),
                                static_cast<int32_t>(lo), cap);
    // The wave chunk fits whenever the wave gives the longest request a split (plan_chunk takes
    // it as the search's bound unprobed).
    int64_t busy = 0;
    for (const PlanReq& q : b) busy += q.tiles > 0 ? q.row_tiles : 0;
    if (busy > 0 && blocks / busy >= 1 && max_tiles > 0) {
      const int64_t s = std::min<int64_t>(blocks / busy, max_tiles);
      const int32_t wave = static_cast<int32_t>(ceil_div(max_tiles, s));
      int64_t big_wave = 0;
      for (const PlanReq& q : b)
        big_wave += plan_big_blocks(static_cast<int32_t>(q.tiles),
                                    static_cast<int32_t>(q.row_tiles), wave, cap);
      ASSERT_LE(big_wave, blocks) << "trial " << trial << ": the wave chunk " << wave;
    }
    int probes = 0;
    const int32_t c = plan(b, cap, blocks, &probes);
    if (big_lo <= blocks) {
      ++lo_fits;
      ASSERT_EQ(c, lo) << "trial " << trial << ": the even share fits (" << big_lo << " <= "
                       << blocks << ")";
      ASSERT_LE(probes, 1) << "trial " << trial;
    } else if (lo < std::max<int64_t>(max_tiles, kMinSplitTiles)) {
      ASSERT_GT(c, lo) << "trial " << trial;  // searched above lo
      if (equal) {
        // The uniform plan's chunk fits and bounds the search.
        const int64_t rows = static_cast<int64_t>(b.size()) * one.row_tiles;
        const int64_t wave = ceil_div(one.tiles, std::clamp<int64_t>(blocks / rows, 1, one.tiles));
        if (wave > lo) {
          ASSERT_LE(c, wave) << "trial " << trial;
        }
      }
    }
  }
  // Both branches are exercised (counts from this generator, seed 777).
  EXPECT_GT(lo_fits, 100);
  EXPECT_LT(lo_fits, 1900);
}

}  // namespace
}  // namespace mlaverify

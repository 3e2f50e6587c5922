// Tests of include/mlaverify/split_plan.h: both plans cover every key exactly once, in whole
// tiles, and the folded plan's splits are as even as whole tiles allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace
}  // namespace mlaverify

// Tests of model/tree.h and model/bitrows.h: parent-array validation, depths and positions,
// ancestry, and the round trips parent array <-> ancestor bits <-> SGLang links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "model/bitrows.h"
#include "model/tree.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::expect_invalid;

// A random recursive tree: parent[t] uniform in [0, t) (docs/spec.md §8's generator).
DraftTree random_tree(int32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> parent(n);  // [D]
  parent[0] = -1;
  for (int32_t t = 1; t < n; ++t) {
    parent[t] = static_cast<int32_t>(std::uniform_int_distribution<int32_t>(0, t - 1)(rng));
  }
  return DraftTree::from_parents(parent);
}

// Ancestor sets built the slow, obvious way (set of parent plus the parent's set), an oracle
// independent of DraftTree's walk-up and word-copy implementations.
std::vector<std::set<int32_t>> ancestor_sets(const std::vector<int32_t>& parent) {
  std::vector<std::set<int32_t>> anc(parent.size());  // [D]
  for (size_t t = 1; t < parent.size(); ++t) {
    anc[t] = anc[parent[t]];
    anc[t].insert(parent[t]);
  }
  return anc;
}

const std::vector<int32_t> kSizes = {1, 2, 3, 31, 32, 33, 63, 64, 65, 127, 128, 1000, 1024, 4096};

std::vector<DraftTree> shapes(int32_t n, uint64_t seed) {
  return {random_tree(n, seed), DraftTree::chain(n), DraftTree::star(n)};
}

TEST(BitRows, SetTestCountAcrossWordBoundaries) {
  BitRows b(3, 130);  // [3, 130]: three words per row, the last one partial
  EXPECT_EQ(b.words_per_row(), 3);
  for (int32_t c : {0, 63, 64, 127, 128, 129}) b.set(1, c);
  for (int32_t c = 0; c < 130; ++c) {
    bool want = c == 0 || c == 63 || c == 64 || c == 127 || c == 128 || c == 129;
    EXPECT_EQ(b.test(1, c), want) << c;
    EXPECT_FALSE(b.test(0, c));
    EXPECT_FALSE(b.test(2, c));
  }
  EXPECT_EQ(b.count_row(1), 6);
  b.set(1, 64, false);
  EXPECT_EQ(b.count_row(1), 5);
  EXPECT_FALSE(b.test(1, 64));
  BitRows same(3, 130);
  for (int32_t c : {0, 63, 127, 128, 129}) same.set(1, c);
  EXPECT_TRUE(b == same);
  same.set(2, 5);
  EXPECT_FALSE(b == same);
  EXPECT_FALSE(BitRows(3, 130) == BitRows(3, 129));  // same words, different shape
}

TEST(BitRows, RejectsBadShapesAndIndices) {
  expect_invalid([] { BitRows(-1, 4); }, "rows", -1);
  expect_invalid([] { BitRows(4, -2); }, "cols", -1);
  BitRows b(2, 5);
  expect_invalid([&] { (void)b.test(2, 0); }, "row", 2);
  expect_invalid([&] { (void)b.test(-1, 0); }, "row", -1);
  expect_invalid([&] { b.set(0, 5); }, "col", 5);
  expect_invalid([&] { (void)b.count_row(7); }, "row", 7);
}

TEST(DraftTree, FromParentsRejectsEachInvalidNode) {
  expect_invalid([] { DraftTree::from_parents({}); }, "parent", -1, "empty");
  expect_invalid([] { DraftTree::from_parents({0, 0}); }, "parent", 0, "root");
  expect_invalid([] { DraftTree::from_parents({-1, 0, 2}); }, "parent", 2);      // self-parent
  expect_invalid([] { DraftTree::from_parents({-1, 0, 0, 5}); }, "parent", 3);   // later node
  expect_invalid([] { DraftTree::from_parents({-1, 0, 0, -1}); }, "parent", 3);  // second root
  expect_invalid([] { DraftTree::from_parents({-1, 1}); }, "parent", 1);
  expect_invalid([] { DraftTree::chain(0); }, "n", -1);
  expect_invalid([] { DraftTree::star(-3); }, "n", -1);
}

TEST(DraftTree, DepthsAndPositionsOfAHandDrawnTree) {
  // Edges (child <- parent): 1 <- 0, 2 <- 0, 3 <- 1, 4 <- 1, 5 <- 2, 6 <- 5.
  DraftTree t = DraftTree::from_parents({-1, 0, 0, 1, 1, 2, 5});
  const std::vector<int32_t> depth = {0, 1, 1, 2, 2, 2, 3};
  for (int32_t i = 0; i < t.size(); ++i) EXPECT_EQ(t.depth(i), depth[i]) << i;
  EXPECT_EQ(t.max_depth(), 3);
  // position = P + depth; siblings 1 and 2 share position P + 1.
  EXPECT_EQ(t.positions(10), (std::vector<int64_t>{10, 11, 11, 12, 12, 12, 13}));
  // int64 positions beyond int32 (docs/spec.md §3: positions are int64).
  EXPECT_EQ(t.positions(int64_t{1} << 33).back(), (int64_t{1} << 33) + 3);
  EXPECT_EQ(t.children(1), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(t.children(2), (std::vector<int32_t>{5}));
  EXPECT_TRUE(t.children(4).empty());
  EXPECT_EQ(t.to_string(), "[-1,0,0,1,1,2,5]");
  EXPECT_EQ(t.parent(6), 5);
  EXPECT_EQ(t.parents(), (std::vector<int32_t>{-1, 0, 0, 1, 1, 2, 5}));
}

TEST(DraftTree, AccessorsRejectOutOfRangeNodes) {
  DraftTree t = DraftTree::chain(4);
  expect_invalid([&] { (void)t.depth(4); }, "node", 4);
  expect_invalid([&] { (void)t.parent(-1); }, "node", -1);
  expect_invalid([&] { (void)t.positions(-1); }, "prefix_len", -1);
  expect_invalid([&] { (void)t.positions(INT64_MAX - 1); }, "prefix_len", -1);  // P + 3 overflows
  expect_invalid([&] { (void)t.is_ancestor(9, 1); }, "ancestor", 9);
  expect_invalid([&] { (void)t.visible(1, 4); }, "column", 4);
  expect_invalid([&] { (void)t.children(5); }, "node", 5);
}

TEST(DraftTree, DefaultIsTheOneNodeTree) {
  DraftTree t;
  EXPECT_EQ(t.size(), 1);
  EXPECT_TRUE(t == DraftTree::chain(1));
  EXPECT_TRUE(t.children(0).empty());
  EXPECT_EQ(t.links().next_token, (std::vector<int64_t>{-1}));
  EXPECT_EQ(t.ancestor_bits().count_row(0), 1);
}

TEST(DraftTree, ChainAndStarShapes) {
  DraftTree c = DraftTree::chain(4096);  // depth must be O(D): a deep chain is the worst case
  for (int32_t i = 0; i < c.size(); ++i) ASSERT_EQ(c.depth(i), i);
  EXPECT_EQ(c.max_depth(), 4095);
  EXPECT_TRUE(c.is_ancestor(0, 4095));
  EXPECT_TRUE(c.is_ancestor(4094, 4095));
  DraftTree s = DraftTree::star(1024);
  for (int32_t i = 1; i < s.size(); ++i) ASSERT_EQ(s.depth(i), 1);
  EXPECT_EQ(s.max_depth(), 1);
  EXPECT_FALSE(s.is_ancestor(1, 2));
  EXPECT_EQ(static_cast<int32_t>(s.children(0).size()), 1023);
  DraftTree one = DraftTree::chain(1);
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(one.max_depth(), 0);
  EXPECT_EQ(one.positions(7), (std::vector<int64_t>{7}));
}

TEST(DraftTree, AncestryMatchesSetOracle) {
  for (int32_t n : {1, 2, 3, 31, 64, 65, 200}) {
    for (const DraftTree& t : shapes(n, 1000 + n)) {
      auto anc = ancestor_sets(t.parents());
      for (int32_t i = 0; i < n; ++i) {
        ASSERT_EQ(t.depth(i), static_cast<int32_t>(anc[i].size())) << t.to_string();
        for (int32_t j = 0; j < n; ++j) {
          bool a = anc[i].count(j) > 0;
          ASSERT_EQ(t.is_ancestor(j, i), a) << t.to_string() << " j=" << j << " i=" << i;
          ASSERT_EQ(t.visible(i, j), a || i == j);
        }
      }
    }
  }
}

TEST(DraftTree, AncestorBitsAreTheVisibilityBlock) {
  for (int32_t n : kSizes) {
    if (n > 1024) continue;  // the O(D^2) oracle below is slow beyond this; round trip covers 4096
    DraftTree t = random_tree(n, 77 + n);
    BitRows b = t.ancestor_bits();
    ASSERT_EQ(b.rows(), n);
    ASSERT_EQ(b.cols(), n);
    auto anc = ancestor_sets(t.parents());
    for (int32_t i = 0; i < n; ++i) {
      // docs/spec.md §2: row t has depth(t) + 1 ones, column 0 and the diagonal set.
      ASSERT_EQ(b.count_row(i), t.depth(i) + 1);
      ASSERT_TRUE(b.test(i, 0));
      ASSERT_TRUE(b.test(i, i));
      for (int32_t j : anc[i]) ASSERT_TRUE(b.test(i, j));
    }
  }
}

TEST(DraftTree, AncestorBitsRoundTrip) {
  for (int32_t n : kSizes) {
    for (const DraftTree& t : shapes(n, 5 + n)) {
      DraftTree back = DraftTree::from_ancestor_bits(t.ancestor_bits());
      ASSERT_EQ(back.parents(), t.parents()) << "n=" << n;
    }
  }
}

TEST(DraftTree, FromAncestorBitsRejectsEachMalformedRow) {
  expect_invalid([] { DraftTree::from_ancestor_bits(BitRows(3, 4)); }, "ancestor_bits", -1);
  expect_invalid([] { DraftTree::from_ancestor_bits(BitRows(0, 0)); }, "ancestor_bits", -1);

  const DraftTree chain = DraftTree::chain(130);
  {  // diagonal missing at a word boundary
    BitRows b = chain.ancestor_bits();
    b.set(64, 64, false);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 64, "diagonal");
  }
  {  // the root column missing
    BitRows b = chain.ancestor_bits();
    b.set(5, 0, false);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 5, "column 0");
  }
  {  // a bit above the diagonal, in a later word than the diagonal's
    BitRows b = chain.ancestor_bits();
    b.set(5, 100, true);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 5, "above");
  }
  {  // a bit above the diagonal in the same word
    BitRows b = chain.ancestor_bits();
    b.set(62, 63, true);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 62, "above");
  }
  {  // parent-only row (docs/spec.md §7.6): node 3 of a chain sees 0, 2, 3, not its grandparent 1
    BitRows b = DraftTree::chain(5).ancestor_bits();
    b.set(3, 1, false);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 3, "transitive");
  }
  {  // two siblings both claimed as ancestors: star node 3 sees 1 and 2
    BitRows b = DraftTree::star(4).ancestor_bits();
    b.set(3, 1, true);
    b.set(3, 2, true);
    expect_invalid([&] { DraftTree::from_ancestor_bits(b); }, "ancestor_bits", 3);
  }
}

TEST(DraftTree, LinksOfAHandDrawnTree) {
  // parents [-1,0,0,1,1,2]: children 0 -> {1,2}, 1 -> {3,4}, 2 -> {5}.
  // next_token = first child: 0->1, 1->3, 2->5, leaves -1.
  // next_sibling = next child of the same parent: 1->2, 3->4, everything else -1.
  DraftTree t = DraftTree::from_parents({-1, 0, 0, 1, 1, 2});
  TreeLinks l = t.links();
  EXPECT_EQ(l.next_token, (std::vector<int64_t>{1, 3, 5, -1, -1, -1}));
  EXPECT_EQ(l.next_sibling, (std::vector<int64_t>{-1, 2, -1, 4, -1, -1}));
  EXPECT_EQ(DraftTree::from_links(l).parents(), t.parents());
}

TEST(DraftTree, LinksRoundTrip) {
  for (int32_t n : kSizes) {
    for (const DraftTree& t : shapes(n, 99 + n)) {
      TreeLinks l = t.links();
      ASSERT_EQ(static_cast<int32_t>(l.next_token.size()), n);
      DraftTree back = DraftTree::from_links(l);
      ASSERT_EQ(back.parents(), t.parents()) << "n=" << n;
      // And links -> parents -> links is the identity on canonical links.
      ASSERT_EQ(back.links().next_token, l.next_token);
      ASSERT_EQ(back.links().next_sibling, l.next_sibling);
    }
  }
}

TEST(DraftTree, FromLinksAcceptsSiblingsInAnyOrder) {
  // Root's children listed 2 then 1: still the star [-1,0,0].
  TreeLinks l{{2, -1, -1}, {-1, -1, 1}};
  EXPECT_EQ(DraftTree::from_links(l).parents(), (std::vector<int32_t>{-1, 0, 0}));
}

TEST(DraftTree, FromLinksRejectsEachMalformedLink) {
  expect_invalid([] { DraftTree::from_links({{}, {}}); }, "next_token", -1);
  expect_invalid([] { DraftTree::from_links({{1, -1}, {-1}}); }, "next_sibling", -1);
  // The root has no siblings.
  expect_invalid([] { DraftTree::from_links({{1, -1}, {1, -1}}); }, "next_sibling", 0);
  // Indices out of range, both directions.
  expect_invalid([] { DraftTree::from_links({{1, 9, -1}, {-1, 2, -1}}); }, "next_token", 1);
  expect_invalid([] { DraftTree::from_links({{1, -1, -1}, {-1, -5, -1}}); }, "next_sibling", 1);
  // A sibling list that loops back on itself.
  expect_invalid([] { DraftTree::from_links({{1, -1}, {-1, 1}}); }, "next_sibling", 1, "cycle");
  // A child link back up to the root.
  expect_invalid([] { DraftTree::from_links({{1, 0}, {-1, -1}}); }, "next_token", 1, "cycle");
  // Node 2 listed as a child of 1 while already the root's child (a longer cycle / DAG).
  expect_invalid([] { DraftTree::from_links({{1, 2, -1}, {-1, 2, -1}}); }, "next_token", 1);
  // Unreachable: node 2 is named by no link.
  expect_invalid(
      [] {
        DraftTree::from_links({{1, -1, -1}, {-1, -1, -1}});
      },
      "next_token", 2, "unreachable");
  // A child before its parent: 1 hangs under 2.
  expect_invalid(
      [] {
        DraftTree::from_links({{2, -1, 1}, {-1, -1, -1}});
      },
      "next_token", 2, "after");
}

TEST(DraftTree, FromLinksRejectsANodeReachedTwice) {
  // 0 -> {1, 2}; both 1 and 2 claim 3 as first child. Which claim is met second depends on the
  // traversal order, so either parent may be named, but it must be a next_token at 1 or 2.
  TreeLinks l{{1, 3, 3, -1}, {-1, 2, -1, -1}};
  try {
    DraftTree::from_links(l);
    ADD_FAILURE() << "accepted a node with two parents";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "next_token");
    EXPECT_TRUE(e.index() == 1 || e.index() == 2) << e.what();
    EXPECT_NE(e.detail().find("reached twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlaverify::model

// Tests of ServingState: hand-worked lifecycles (token and paged), long seeded random sequences
// with the invariant check and a KV-content shadow after every step, and every rejected input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "mlaverify/error.h"
#include "model/serving.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::expect_invalid;

using Slots = std::vector<int64_t>;

// A logical token: the request, the verify step that wrote it (0 for the admitted prefix) and the
// req_to_token column it was written at. Its KV row is a pure function of the tag.
struct Tag {
  int64_t req;
  int64_t epoch;
  int64_t column;
};

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Integers -128..127 over 32: at most 8 significant bits, so exact in bf16 and fp32 and the
// expected row needs no rounding model at all.
float token_value(int32_t layer, const Tag& t, int k) {
  uint64_t h =
      mix(mix(mix(static_cast<uint64_t>(t.req) * 1000003u + static_cast<uint64_t>(t.epoch)) ^
              static_cast<uint64_t>(t.column)) ^
          (static_cast<uint64_t>(layer) << 20 | static_cast<uint64_t>(k)));
  return static_cast<float>(static_cast<int>(h % 256) - 128) / 32.0f;
}

// Drives a ServingState and keeps the tag of every live column beside it.
struct Shadow {
  std::map<int64_t, std::vector<Tag>> cols;  // request -> tag per req_to_token column
  std::map<int64_t, int64_t> epoch;          // request -> current verify step

  RowGenerator gen() {
    return [this](int32_t layer, int64_t req, int64_t column, float* row) {
      const Tag t{req, epoch[req], column};
      for (int k = 0; k < kRowDim; ++k) row[k] = token_value(layer, t, k);
    };
  }

  std::optional<int64_t> admit(ServingState& s, int64_t prefix) {
    // The id is not known before admit; the generator reads epoch[req], which defaults to 0.
    auto id = s.admit(prefix, gen());
    if (id) {
      for (int64_t j = 0; j < prefix; ++j) cols[*id].push_back({*id, 0, j});
      cols[*id];  // prefix 0 still makes a live entry
    }
    return id;
  }

  std::optional<Slots> begin_verify(ServingState& s, int64_t req, int32_t d) {
    ++epoch[req];
    auto slots = s.begin_verify(req, d, gen());
    if (slots) {
      const int64_t p = static_cast<int64_t>(cols[req].size());
      for (int32_t t = 0; t < d; ++t) cols[req].push_back({req, epoch[req], p + t});
    }
    return slots;
  }

  void accept(ServingState& s, int64_t req, const std::vector<int32_t>& path,
              const std::vector<int32_t>& parents = {}) {
    const int64_t p = s.prefix_len(req);
    s.accept(req, path, parents);
    std::vector<Tag>& c = cols[req];
    std::vector<Tag> kept;
    for (int32_t node : path) kept.push_back(c[static_cast<size_t>(p + node)]);
    c.resize(static_cast<size_t>(p));
    c.insert(c.end(), kept.begin(), kept.end());
  }

  void finish(ServingState& s, int64_t req) {
    s.finish(req);
    cols.erase(req);
  }

  // Every live column of `req`, in every layer, reads exactly its tag's row.
  void check(const ServingState& s, int64_t req) const {
    const auto& c = cols.at(req);
    ASSERT_EQ(static_cast<int64_t>(c.size()), s.prefix_len(req) + s.draft_nodes(req));
    const int64_t row = s.row(req);
    for (int32_t l = 0; l < s.num_layers(); ++l) {
      for (size_t j = 0; j < c.size(); ++j) {
        const auto got = s.layer(l).read_row(s.req_to_token().at(row, static_cast<int64_t>(j)));
        for (int k = 0; k < kRowDim; ++k) {
          ASSERT_EQ(got[static_cast<size_t>(k)], token_value(l, c[j], k))
              << "request " << req << " column " << j << " layer " << l << " k " << k;
        }
      }
    }
  }

  void check_all(const ServingState& s) const {
    for (const auto& [req, c] : cols) check(s, req);
  }
};

// Random tree (parent[t] uniform in [0, t)) and the ancestor chain of a random node, root first.
void random_tree_path(std::mt19937_64& rng, int32_t d, std::vector<int32_t>* parents,
                      std::vector<int32_t>* path) {
  parents->assign(static_cast<size_t>(d), -1);
  for (int32_t t = 1; t < d; ++t) {
    (*parents)[static_cast<size_t>(t)] = static_cast<int32_t>(rng() % static_cast<uint64_t>(t));
  }
  path->clear();
  for (int32_t n = static_cast<int32_t>(rng() % static_cast<uint64_t>(d)); n != -1;
       n = (*parents)[static_cast<size_t>(n)]) {
    path->push_back(n);
  }
  std::reverse(path->begin(), path->end());
}

ServingConfig token_config(int64_t pool, int32_t layers = 1) {
  ServingConfig c;
  c.pool_size = pool;
  c.num_layers = layers;
  c.max_reqs = 4;
  c.max_context_len = 16;
  return c;
}

std::vector<int64_t> as_vec(const std::deque<int64_t>& d) { return {d.begin(), d.end()}; }

TEST(Serving, TokenLifecycleWorkedByHand) {
  ServingState s(token_config(16, 2));
  Shadow sh;
  const int64_t a = *sh.admit(s, 3);
  EXPECT_EQ(s.row(a), 1);
  EXPECT_EQ(s.prefix_slots(a), Slots({1, 2, 3}));
  const int64_t b = *sh.admit(s, 2);
  EXPECT_EQ(s.row(b), 2);
  EXPECT_EQ(s.prefix_slots(b), Slots({4, 5}));
  EXPECT_EQ(*sh.begin_verify(s, a, 4), Slots({6, 7, 8, 9}));
  EXPECT_EQ(s.req_to_token().at(1, 5), 8);
  s.check_invariants();
  sh.check_all(s);
  // Accept root then node 2 (parent 0): SGLang page size 1 keeps slots 6 and 8 where they are.
  sh.accept(s, a, {0, 2}, {-1, 0, 0, 2});
  EXPECT_EQ(s.prefix_len(a), 5);
  EXPECT_EQ(s.draft_nodes(a), 0);
  EXPECT_EQ(s.prefix_slots(a), Slots({1, 2, 3, 6, 8}));
  EXPECT_EQ(s.req_to_token().at(1, 5), 0);  // rejected columns cleared
  EXPECT_EQ(as_vec(s.token_allocator()->free_slots()), Slots({10, 11, 12, 13, 14, 15, 16, 7, 9}));
  sh.check_all(s);
  s.check_invariants();
  sh.finish(s, b);
  EXPECT_EQ(as_vec(s.token_allocator()->free_slots()),
            Slots({10, 11, 12, 13, 14, 15, 16, 7, 9, 4, 5}));
  // Rows: 3, 4 were free, row 2 appended; the new request gets row 3.
  const int64_t c = *sh.admit(s, 10);
  EXPECT_EQ(s.row(c), 3);
  EXPECT_EQ(s.prefix_slots(c), Slots({10, 11, 12, 13, 14, 15, 16, 7, 9, 4}));
  // One slot left: an admit of 2 fails and takes nothing.
  EXPECT_EQ(sh.admit(s, 2), std::nullopt);
  EXPECT_EQ(s.token_allocator()->available(), 1);
  EXPECT_EQ(s.live_requests(), Slots({a, c}));
  EXPECT_EQ(sh.begin_verify(s, a, 2), std::nullopt);
  EXPECT_EQ(s.draft_nodes(a), 0);
  s.check_invariants();
  sh.check_all(s);
}

TEST(Serving, PagedLifecycleWorkedByHand) {
  ServingConfig cfg;
  cfg.pool_size = 32;
  cfg.page_size = 4;
  cfg.allocator = AllocatorKind::Paged;
  cfg.num_layers = 2;
  cfg.max_reqs = 2;
  cfg.max_context_len = 24;
  ServingState s(cfg);
  Shadow sh;
  const int64_t a = *sh.admit(s, 6);  // pages 1, 2: slots 4..9; 10, 11 reserved
  EXPECT_EQ(s.prefix_slots(a), Slots({4, 5, 6, 7, 8, 9}));
  // 6 -> 11: the tail 10, 11 first, then page 3 for positions 8..10.
  EXPECT_EQ(*sh.begin_verify(s, a, 5), Slots({10, 11, 12, 13, 14}));
  // Path 0 -> 1 -> 3: node 3's row moves to node 2's slot 12 (paged SGLang keeps positions on
  // their page offsets); positions 9, 10 (slots 13, 14) return to page 3's reserved tail.
  sh.accept(s, a, {0, 1, 3}, {-1, 0, 1, 1, 3});
  EXPECT_EQ(s.prefix_slots(a), Slots({4, 5, 6, 7, 8, 9, 10, 11, 12}));
  const PagedAllocator& pa = *s.paged_allocator();
  EXPECT_EQ(pa.committed(), 9);
  EXPECT_EQ(pa.reserved(), 3);
  EXPECT_EQ(pa.slot_state(13), PagedAllocator::SlotState::Reserved);
  sh.check_all(s);
  s.check_invariants();
  // 9 -> 17: tail 13, 14, 15, then page 4 (16..19), then page 5 for position 16 (slot 20).
  EXPECT_EQ(*sh.begin_verify(s, a, 8), Slots({13, 14, 15, 16, 17, 18, 19, 20}));
  sh.accept(s, a, {0});
  EXPECT_EQ(s.prefix_len(a), 10);
  EXPECT_EQ(as_vec(pa.free_pages()), Slots({4, 5, 6, 7, 8}));  // pages 4, 5 prepended
  EXPECT_EQ(pa.committed(), 10);
  EXPECT_EQ(pa.reserved(), 2);
  sh.check_all(s);
  s.check_invariants();
  sh.finish(s, a);
  EXPECT_EQ(as_vec(pa.free_pages()), Slots({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(pa.allocated(), 0);
  s.check_invariants();
}

struct RandomCase {
  const char* name;
  AllocatorKind kind;
  int64_t page_size;
  DType dtype;
  bool split_layout;
};

// Runs `steps` random admit / verify / accept / finish operations (plus need_sort toggles), with
// check_invariants after every step and a content check of the touched request.
void run_random(const RandomCase& rc, uint64_t seed, int steps) {
  SCOPED_TRACE(rc.name);
  ServingConfig cfg;
  cfg.pool_size = 240;
  cfg.page_size = rc.page_size;
  cfg.allocator = rc.kind;
  cfg.num_layers = 2;
  cfg.max_reqs = 10;
  cfg.max_context_len = 96;
  cfg.dtype = rc.dtype;
  if (rc.split_layout) cfg.layout = KvPool::split_regions(cfg.pool_size + cfg.page_size);
  ServingState s(cfg);
  Shadow sh;
  std::mt19937_64 rng(seed);
  for (int step = 0; step < steps; ++step) {
    const auto live = s.live_requests();
    const int op = static_cast<int>(rng() % 20);
    int64_t touched = -1;
    if (op < 5 || live.empty()) {
      auto id = sh.admit(s, static_cast<int64_t>(rng() % 40));
      if (id) touched = *id;
    } else {
      const int64_t req = live[rng() % live.size()];
      if (op < 7) {
        sh.finish(s, req);
      } else if (op == 7) {
        s.set_need_sort(rng() % 2 == 0);
      } else if (s.draft_nodes(req) == 0) {
        const int32_t room = static_cast<int32_t>(cfg.max_context_len - s.prefix_len(req));
        if (room == 0) {
          sh.finish(s, req);
        } else {
          const int32_t d = 1 + static_cast<int32_t>(rng() % std::min<uint64_t>(12, room));
          if (sh.begin_verify(s, req, d)) touched = req;
        }
      } else {
        std::vector<int32_t> parents, path;
        random_tree_path(rng, s.draft_nodes(req), &parents, &path);
        if (rng() % 2) parents.clear();  // the path alone is valid input too
        sh.accept(s, req, path, parents);
        touched = req;
      }
    }
    ASSERT_NO_THROW(s.check_invariants()) << "step " << step;
    // Conservation against the shadow, independent of the state's own bookkeeping.
    int64_t live_tokens = 0;
    for (const auto& [req, c] : sh.cols) {
      live_tokens += static_cast<int64_t>(c.size());
      ASSERT_NE(s.row(req), 0);
    }
    if (const TokenAllocator* t = s.token_allocator()) {
      ASSERT_EQ(t->allocated(), live_tokens);
    } else {
      ASSERT_EQ(s.paged_allocator()->committed(), live_tokens);
    }
    if (touched >= 0) {
      sh.check(s, touched);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (step % 250 == 0) sh.check_all(s);
  }
  sh.check_all(s);
  for (int64_t req : s.live_requests()) sh.finish(s, req);
  s.check_invariants();
  if (const TokenAllocator* t = s.token_allocator()) {
    EXPECT_EQ(t->available(), cfg.pool_size);
  } else {
    EXPECT_EQ(s.paged_allocator()->allocated(), 0);
  }
}

TEST(Serving, RandomSequencesConserveSlotsAndContent) {
  const RandomCase cases[] = {
      {"token bf16", AllocatorKind::Token, 1, DType::BF16, false},
      {"paged ps=1 fp32", AllocatorKind::Paged, 1, DType::F32, false},
      {"paged ps=4 bf16 split", AllocatorKind::Paged, 4, DType::BF16, true},
      {"paged ps=16 bf16", AllocatorKind::Paged, 16, DType::BF16, false},
  };
  for (const RandomCase& rc : cases) {
    run_random(rc, 11, 1500);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Serving, RejectsBadInput) {
  ServingState s(token_config(16));
  Shadow sh;
  const RowGenerator g = sh.gen();
  expect_invalid([&] { (void)s.admit(-1, g); }, "prefix_len", -1);
  expect_invalid([&] { (void)s.admit(17, g); }, "prefix_len", -1);
  expect_invalid([&] { (void)s.admit(2, RowGenerator{}); }, "row_generator", -1);
  const int64_t a = *sh.admit(s, 10);
  expect_invalid([&] { (void)s.begin_verify(99, 2, g); }, "request", 99);
  expect_invalid([&] { (void)s.begin_verify(a, 0, g); }, "draft_nodes", a);
  expect_invalid([&] { (void)s.begin_verify(a, 7, g); }, "draft_nodes", a);  // 10 + 7 > 16
  expect_invalid([&] { (void)s.begin_verify(a, 2, RowGenerator{}); }, "row_generator", -1);
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{0}); }, "request", a);  // not verifying
  ASSERT_TRUE(sh.begin_verify(s, a, 4));
  expect_invalid([&] { (void)s.begin_verify(a, 1, g); }, "request", a);  // already verifying
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{}); }, "path", -1);
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{1}); }, "path", 0);
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{0, 0}); }, "path", 1);
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{0, 4}); }, "path", 1);
  expect_invalid([&] { s.accept(a, std::vector<int32_t>{0, 2, 1}); }, "path", 2);
  expect_invalid(
      [&] {
        s.accept(a, std::vector<int32_t>{0, 1}, std::vector<int32_t>{-1, 0});
      },
      "parents", -1);
  // Node 3's parent is 2, not 1: the path 0 -> 1 -> 3 is not an ancestor chain.
  expect_invalid(
      [&] {
        s.accept(a, std::vector<int32_t>{0, 1, 3}, std::vector<int32_t>{-1, 0, 0, 2});
      },
      "parents", 3);
  // Rejected accepts changed nothing: the step is still open and every row still reads right.
  EXPECT_EQ(s.draft_nodes(a), 4);
  s.check_invariants();
  sh.check_all(s);
  sh.finish(s, a);
  expect_invalid([&] { s.finish(a); }, "request", a);
  expect_invalid([&] { (void)s.prefix_len(a); }, "request", a);
  expect_invalid([&] { (void)s.row(a); }, "request", a);
  expect_invalid([&] { (void)s.prefix_slots(a); }, "request", a);
  expect_invalid([&] { (void)s.draft_slots(a); }, "request", a);
  expect_invalid([&] { (void)s.layer(1); }, "layer", 1);
  expect_invalid([&] { (void)std::as_const(s).layer(-1); }, "layer", -1);

  ServingConfig bad = token_config(16);
  bad.page_size = 2;  // the token allocator is page size 1
  expect_invalid([&] { ServingState x(bad); }, "page_size", -1);
  bad = token_config(16);
  bad.num_layers = 0;
  expect_invalid([&] { ServingState x(bad); }, "num_layers", -1);
  bad = token_config(0);
  expect_invalid([&] { ServingState x(bad); }, "pool_size", -1);
  bad = token_config(int64_t{1} << 31);  // slot ids would not fit req_to_token's int32
  expect_invalid([&] { ServingState x(bad); }, "pool_size", -1);
  bad = token_config(16);
  bad.max_reqs = 0;
  expect_invalid([&] { ServingState x(bad); }, "max_reqs", -1);
}

TEST(Serving, RowsAreReusedIdsAreNot) {
  ServingState s(token_config(16));
  Shadow sh;
  const int64_t a = *sh.admit(s, 1);
  sh.finish(s, a);
  const int64_t b = *sh.admit(s, 1);
  EXPECT_NE(a, b);
  EXPECT_EQ(s.row(b), 2);  // row 1 went to the back of the free rows
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sh.admit(s, 0));
  EXPECT_EQ(sh.admit(s, 0), std::nullopt);  // 4 rows in use: no row left
  s.check_invariants();
}

}  // namespace
}  // namespace mlaverify::model

// Tests of defragmentation: metrics on hand-made layouts, tier 0 (sorted allocation), tier 1
// compaction (one ascending run per request, every KV byte kept) and attention unchanged by it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/defrag.h"
#include "model/mask.h"
#include "model/metadata.h"
#include "model/serving.h"
#include "model/tree.h"

namespace mlaverify::model {
namespace {

using Slots = std::vector<int64_t>;

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rows of pseudo-random values in [-4, 4): any value is fine here, only bytes are compared.
RowGenerator hash_rows(uint64_t salt) {
  return [salt](int32_t layer, int64_t req, int64_t column, float* row) {
    const uint64_t base =
        mix64(salt ^ mix64(static_cast<uint64_t>(req) * 7919u +
                           static_cast<uint64_t>(column) * 131u + static_cast<uint64_t>(layer)));
    for (int k = 0; k < kRowDim; ++k) {
      const uint64_t h = mix64(base + static_cast<uint64_t>(k));
      row[k] = static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 8.0 - 4.0);
    }
  };
}

ServingConfig small_token(int64_t pool) {
  ServingConfig c;
  c.pool_size = pool;
  c.max_reqs = 4;
  c.max_context_len = 16;
  return c;
}

// ------------------------------------------------------------------------------ metrics

TEST(Defrag, MetricsOfHandMadeTokenLayoutAndItsCompaction) {
  ServingState s(small_token(16));
  const RowGenerator g = hash_rows(1);
  const int64_t a = *s.admit(2, g);  // slots 1, 2
  const int64_t b = *s.admit(2, g);  // slots 3, 4
  ASSERT_EQ(*s.begin_verify(a, 3, g), Slots({5, 6, 7}));
  s.accept(a, std::vector<int32_t>{0, 2});  // A: 1, 2, 5, 7; slot 6 appended to the free list
  ASSERT_EQ(s.prefix_slots(a), Slots({1, 2, 5, 7}));
  const auto kept_a3 = s.layer(0).raw_row(7);
  FragmentationMetrics m = measure(s);
  // A has runs {1, 2}, {5}, {7}; B has {3, 4}: (3 + 1) / 2 requests, 6 tokens / 4 runs.
  EXPECT_EQ(m.runs_per_request, 2.0);
  EXPECT_EQ(m.mean_run_length, 1.5);
  EXPECT_EQ(m.free_list_runs, 2);  // [8..16] then [6]
  EXPECT_EQ(m.partial_pages, 0);

  compact(s);
  s.check_invariants();
  EXPECT_EQ(s.prefix_slots(a), Slots({1, 2, 3, 4}));
  EXPECT_EQ(s.prefix_slots(b), Slots({5, 6}));
  EXPECT_EQ(s.layer(0).raw_row(4), kept_a3);  // A's token 3 moved from slot 7 to slot 4
  m = measure(s);
  EXPECT_EQ(m.runs_per_request, 1.0);
  EXPECT_EQ(m.mean_run_length, 3.0);
  EXPECT_EQ(m.free_list_runs, 1);  // [7..16]
  EXPECT_EQ(s.token_allocator()->free_slots().front(), 7);
}

TEST(Defrag, MetricsOfHandMadePagedLayout) {
  ServingConfig c;
  c.pool_size = 32;
  c.page_size = 4;
  c.allocator = AllocatorKind::Paged;
  c.max_reqs = 4;
  c.max_context_len = 16;
  ServingState s(c);
  const RowGenerator g = hash_rows(2);
  const int64_t a = *s.admit(6, g);  // pages 1, 2 (slots 4..9); page 2 partial
  const int64_t b = *s.admit(8, g);  // pages 3, 4 full (slots 12..19)
  FragmentationMetrics m = measure(s);
  EXPECT_EQ(m.runs_per_request, 1.0);
  EXPECT_EQ(m.mean_run_length, 7.0);
  EXPECT_EQ(m.free_list_runs, 1);  // pages [5..8]
  EXPECT_EQ(m.partial_pages, 1);
  s.finish(a);  // pages 1, 2 prepended: [1, 2, 5, 6, 7, 8]
  m = measure(s);
  EXPECT_EQ(m.runs_per_request, 1.0);
  EXPECT_EQ(m.mean_run_length, 8.0);
  EXPECT_EQ(m.free_list_runs, 2);
  EXPECT_EQ(m.partial_pages, 0);
  compact(s);  // B moves to pages 1, 2
  EXPECT_EQ(s.prefix_slots(b), Slots({4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(measure(s).free_list_runs, 1);  // pages [3..8]
  s.check_invariants();
}

TEST(Defrag, EmptyStateMeasuresZero) {
  ServingState s(small_token(8));
  const FragmentationMetrics m = measure(s);
  EXPECT_EQ(m.runs_per_request, 0.0);
  EXPECT_EQ(m.mean_run_length, 0.0);
  EXPECT_EQ(m.free_list_runs, 1);
  compact(s);  // nothing live: the free list is 1..8 again
  EXPECT_EQ(s.token_allocator()->available(), 8);
  s.check_invariants();
}

TEST(Defrag, Tier0SortsFreedSlotsBeforeReuse) {
  ServingState s(small_token(8));
  enable_sorted_allocation(s);
  EXPECT_TRUE(s.token_allocator()->need_sort());
  const RowGenerator g = hash_rows(3);
  const int64_t a = *s.admit(3, g);  // 1, 2, 3
  const int64_t b = *s.admit(2, g);  // 4, 5
  const int64_t c = *s.admit(1, g);  // 6
  s.finish(c);
  s.finish(a);                              // parked on the release list as 6 then 1, 2, 3
  EXPECT_EQ(measure(s).free_list_runs, 3);  // [7, 8], then release [6], [1, 2, 3]
  // Without tier 0 the free list would read 7, 8, 6, 1, 2, 3 and hand out 7, 8, 6, 1;
  // merged and sorted it is 1, 2, 3, 6, 7, 8.
  const int64_t d = *s.admit(4, g);
  EXPECT_EQ(s.prefix_slots(d), Slots({1, 2, 3, 6}));
  EXPECT_EQ(measure(s).free_list_runs, 1);  // [7, 8]
  EXPECT_EQ(s.prefix_slots(b), Slots({4, 5}));
  s.check_invariants();
}

// ------------------------------------------------------------------------------ tier 1

// Raw bytes of every live (request, column) in every layer.
using Snapshot = std::map<std::pair<int64_t, int64_t>, std::vector<std::vector<std::byte>>>;

Snapshot snapshot(const ServingState& s) {
  Snapshot out;
  for (int64_t req : s.live_requests()) {
    const int64_t len = s.prefix_len(req) + s.draft_nodes(req);
    for (int64_t c = 0; c < len; ++c) {
      auto& rows = out[{req, c}];
      const int64_t slot = s.req_to_token().at(s.row(req), c);
      for (int32_t l = 0; l < s.num_layers(); ++l) rows.push_back(s.layer(l).raw_row(slot));
    }
  }
  return out;
}

struct CompactCase {
  const char* name;
  AllocatorKind kind;
  int64_t page_size;
  DType dtype;
  int layout;  // 0 latent-first, 1 padded rows of 640, 2 split regions
};

void run_compaction(const CompactCase& cc, uint64_t seed) {
  SCOPED_TRACE(cc.name);
  ServingConfig cfg;
  cfg.pool_size = 256;
  cfg.page_size = cc.page_size;
  cfg.allocator = cc.kind;
  cfg.num_layers = 2;
  cfg.max_reqs = 8;
  cfg.max_context_len = 80;
  cfg.dtype = cc.dtype;
  if (cc.layout == 1) cfg.layout = KvLayout::latent_first(640);
  if (cc.layout == 2) cfg.layout = KvPool::split_regions(cfg.pool_size + cfg.page_size);
  ServingState s(cfg);
  std::mt19937_64 rng(seed);
  const RowGenerator g = hash_rows(seed);
  int compactions = 0;
  for (int step = 0; step < 1500; ++step) {
    const auto live = s.live_requests();
    const int op = static_cast<int>(rng() % 16);
    if (op < 4 || live.empty()) {
      (void)s.admit(static_cast<int64_t>(rng() % 30), g);
    } else if (op == 4) {
      s.finish(live[rng() % live.size()]);
    } else if (op == 5) {
      // Tier 1, possibly with verify steps still open (their draft columns move too).
      const Snapshot before = snapshot(s);
      compact(s);
      ++compactions;
      ASSERT_NO_THROW(s.check_invariants()) << "step " << step;
      ASSERT_TRUE(snapshot(s) == before) << "a KV row changed in compaction at step " << step;
      // Each request one ascending contiguous run, requests back to back from the first slot,
      // and the free list one ascending run.
      int64_t next = cfg.page_size;
      for (int64_t req : s.live_requests()) {
        const int64_t len = s.prefix_len(req) + s.draft_nodes(req);
        for (int64_t c = 0; c < len; ++c) {
          ASSERT_EQ(s.req_to_token().at(s.row(req), c), next + c) << "request " << req;
        }
        next += (len + cfg.page_size - 1) / cfg.page_size * cfg.page_size;
      }
      const FragmentationMetrics m = measure(s);
      if (!before.empty()) {
        EXPECT_EQ(m.runs_per_request, 1.0);
      }
      EXPECT_LE(m.free_list_runs, 1);
    } else {
      const int64_t req = live[rng() % live.size()];
      if (s.draft_nodes(req) == 0) {
        const int64_t room = cfg.max_context_len - s.prefix_len(req);
        if (room == 0) {
          s.finish(req);
        } else {
          (void)s.begin_verify(req, 1 + static_cast<int32_t>(rng() % std::min<int64_t>(10, room)),
                               g);
        }
      } else {
        // A random ancestor chain: each next node a later one (a valid chain of some tree).
        std::vector<int32_t> path{0};
        const int32_t d = s.draft_nodes(req);
        while (path.back() + 1 < d && rng() % 3 != 0) {
          path.push_back(path.back() + 1 +
                         static_cast<int32_t>(rng() % static_cast<uint64_t>(d - path.back() - 1)));
        }
        s.accept(req, path);
      }
      if (rng() % 8 == 0) s.set_need_sort(rng() % 2 == 0);
    }
    ASSERT_NO_THROW(s.check_invariants()) << "step " << step;
  }
  EXPECT_GT(compactions, 20);
}

TEST(Defrag, CompactionMakesOneRunPerRequestAndKeepsEveryByte) {
  const CompactCase cases[] = {
      {"token bf16", AllocatorKind::Token, 1, DType::BF16, 0},
      {"paged ps=4 fp32 split", AllocatorKind::Paged, 4, DType::F32, 2},
      {"paged ps=16 bf16 padded", AllocatorKind::Paged, 16, DType::BF16, 1},
  };
  for (const CompactCase& cc : cases) {
    run_compaction(cc, 21);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ------------------------------------------------------------------------------ attention

// The verify attention of every request of `s` that has a step open, run by the reference model
// over layer 0 on the CacheSlots path (kv_indices name the prefix then the draft slots).
RefResult verify_all(const ServingState& s, const std::map<int64_t, DraftTree>& trees,
                     const std::vector<bf16>& q,  // [T, H, 576]
                     int32_t heads, std::vector<int64_t>* kv_indices_out) {
  std::vector<int32_t> rows;
  std::vector<int64_t> prefix;
  std::vector<DraftTree> tree_list;
  for (const auto& [req, tree] : trees) {
    rows.push_back(static_cast<int32_t>(s.row(req)));
    prefix.push_back(s.prefix_len(req));
    tree_list.push_back(tree);
  }
  const VerifyMetadata md =
      build_metadata(s.req_to_token(), rows, prefix, tree_list, DraftKvSource::CacheSlots);
  const EncodedMask mask = encode_mask(MaskFormat::QlenOnly, tree_list, prefix);
  const int64_t t_total = md.total_q();
  std::vector<bf16> o(static_cast<size_t>(t_total * heads * kLatentDim));  // [T, H, 512]
  std::vector<float> lse(static_cast<size_t>(t_total * heads));            // [T, H]
  VerifyParams p;
  p.batch_size = static_cast<int32_t>(rows.size());
  p.num_heads = heads;
  p.max_draft = 0;
  for (const DraftTree& t : tree_list) p.max_draft = std::max(p.max_draft, t.size());
  p.max_total_q = t_total;
  p.sm_scale = 0.1352338f;  // DeepSeek-V3 (docs/spec.md §1); any positive scale serves this law
  p.q = q.data();
  p.q_token_stride = static_cast<int64_t>(heads) * kRowDim;
  p.q_head_stride = kRowDim;
  s.layer(0).attach(p);
  p.qo_indptr = md.qo_indptr.data();
  p.kv_indptr = md.kv_indptr.data();
  p.kv_indices = md.kv_indices.data();
  p.kv_indices_len = static_cast<int64_t>(md.kv_indices.size());
  p.draft_source = DraftKvSource::CacheSlots;
  p.k_extend = nullptr;
  attach_mask(p, mask);
  p.o_lat = o.data();
  p.o_token_stride = static_cast<int64_t>(heads) * kLatentDim;
  p.o_head_stride = kLatentDim;
  p.lse = lse.data();
  *kv_indices_out = md.kv_indices;
  return reference_verify(p);
}

// Poisons every slot of layer 0 that no live request owns: a read of a stale slot surfaces as NaN.
void poison_unowned(ServingState& s) {
  std::vector<uint8_t> owned(static_cast<size_t>(s.layer(0).num_slots()), 0);  // [slots]
  for (int64_t r : s.live_requests()) {
    for (int64_t c = 0; c < s.prefix_len(r) + s.draft_nodes(r); ++c) {
      owned[static_cast<size_t>(s.req_to_token().at(s.row(r), c))] = 1;
    }
  }
  for (int64_t slot = 1; slot < s.layer(0).num_slots(); ++slot) {
    if (!owned[static_cast<size_t>(slot)]) s.layer(0).fill_nan(slot);
  }
}

TEST(Defrag, CompactionLeavesAttentionBitIdentical) {
  for (AllocatorKind kind : {AllocatorKind::Token, AllocatorKind::Paged}) {
    SCOPED_TRACE(kind == AllocatorKind::Token ? "token" : "paged ps=4");
    ServingConfig cfg;
    cfg.pool_size = 512;
    cfg.page_size = kind == AllocatorKind::Token ? 1 : 4;
    cfg.allocator = kind;
    cfg.max_reqs = 8;
    cfg.max_context_len = 128;
    ServingState s(cfg);
    std::mt19937_64 rng(7);
    const RowGenerator g = hash_rows(7);
    // Fragment: admit, verify and accept in interleaved rounds, finish some requests.
    std::vector<int64_t> reqs;
    for (int i = 0; i < 6; ++i) reqs.push_back(*s.admit(5 + static_cast<int64_t>(rng() % 20), g));
    for (int round = 0; round < 4; ++round) {
      for (int64_t r : reqs) ASSERT_TRUE(s.begin_verify(r, 2 + static_cast<int32_t>(rng() % 6), g));
      for (int64_t r : reqs) {
        std::vector<int32_t> path{0};
        if (s.draft_nodes(r) > 1 && rng() % 2) path.push_back(1);
        s.accept(r, path);
      }
    }
    s.finish(reqs[1]);
    s.finish(reqs[4]);
    // Open one verify step per live request with a random tree; its draft slots are in the cache.
    std::map<int64_t, DraftTree> trees;
    for (int64_t r : s.live_requests()) {
      const int32_t d = 1 + static_cast<int32_t>(rng() % 7);
      std::vector<int32_t> parent(static_cast<size_t>(d), -1);
      for (int32_t t = 1; t < d; ++t)
        parent[static_cast<size_t>(t)] = static_cast<int32_t>(rng() % t);
      trees.emplace(r, DraftTree::from_parents(parent));
      ASSERT_TRUE(s.begin_verify(r, d, g));
    }
    ASSERT_GT(measure(s).runs_per_request, 1.0) << "the setup must fragment something";
    poison_unowned(s);
    const int32_t heads = 4;
    int64_t t_total = 0;
    for (const auto& [r, t] : trees) t_total += t.size();
    std::vector<bf16> q(static_cast<size_t>(t_total * heads * kRowDim));  // [T, H, 576]
    for (size_t i = 0; i < q.size(); ++i) {
      q[i] =
          float_to_bf16(static_cast<float>(static_cast<double>(mix64(i) >> 11) * 0x1.0p-53 - 0.5));
    }
    std::vector<int64_t> idx_before, idx_after;
    const RefResult before = verify_all(s, trees, q, heads, &idx_before);
    compact(s);
    s.check_invariants();
    poison_unowned(s);  // slots compaction vacated still hold real rows: poison them too
    const RefResult after = verify_all(s, trees, q, heads, &idx_after);
    ASSERT_NE(idx_before, idx_after) << "compaction moved nothing: the law is untested";
    ASSERT_EQ(before.o_lat.size(), after.o_lat.size());
    // Same logical tokens, same bytes, same order of summation: equal to the last bit, no
    // tolerance. memcmp also tells -0.0 from 0.0 and catches NaN (NaN != NaN under ==).
    for (double v : before.o_lat) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(
        std::memcmp(before.o_lat.data(), after.o_lat.data(), before.o_lat.size() * sizeof(double)),
        0);
    ASSERT_EQ(before.lse.size(), after.lse.size());
    EXPECT_EQ(std::memcmp(before.lse.data(), after.lse.data(), before.lse.size() * sizeof(double)),
              0);
  }
}

}  // namespace
}  // namespace mlaverify::model

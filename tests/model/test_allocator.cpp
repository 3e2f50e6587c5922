// Tests of ReqToToken, KvPool and the token / paged allocators: hand-worked SGLang sequences,
// model-based random sequences against a trivially correct shadow, and every rejected input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "mlaverify/bf16.h"
#include "mlaverify/error.h"
#include "model/allocator.h"
#include "model/kv_pool.h"
#include "model/req_to_token.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::expect_invalid;

using Slots = std::vector<int64_t>;

uint16_t bf16_bits_at(const KvPool& pool, int64_t element) {
  uint16_t b;
  std::memcpy(&b, static_cast<const std::byte*>(pool.data()) + element * 2, sizeof b);
  return b;
}

// ------------------------------------------------------------------------------ ReqToToken

TEST(ReqToToken, ZeroFilledRowMajorWithPaddingRow) {
  ReqToToken t(3, 5);  // [4, 5]
  EXPECT_EQ(t.rows(), 4);
  EXPECT_EQ(t.cols(), 5);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(t.at(r, j), 0);
  }
  t.set(2, 3, 77);
  t.set(3, 4, 99);
  EXPECT_EQ(t.at(2, 3), 77);
  EXPECT_EQ(t.data()[2 * 5 + 3], 77);  // row-major
  EXPECT_EQ(t.data()[3 * 5 + 4], 99);
  auto row = t.row(2);
  ASSERT_EQ(row.size(), 5u);
  EXPECT_EQ(row[3], 77);
  EXPECT_EQ(row[4], 0);
}

TEST(ReqToToken, OutOfRangeNamesFlatIndex) {
  ReqToToken t(2, 4);  // [3, 4]
  expect_invalid([&] { t.set(3, 0, 1); }, "req_to_token", 3 * 4 + 0);
  expect_invalid([&] { t.set(1, 4, 1); }, "req_to_token", 1 * 4 + 4);
  expect_invalid([&] { (void)t.at(1, -1); }, "req_to_token", 1 * 4 - 1);
  expect_invalid([&] { (void)t.row(3); }, "req_to_token", 3 * 4);
  expect_invalid([] { ReqToToken bad(0, 4); }, "max_reqs", -1);
  expect_invalid([] { ReqToToken bad(2, 0); }, "max_context_len", -1);
}

// ------------------------------------------------------------------------------ KvPool

std::vector<float> ramp_row(float base) {
  std::vector<float> row(kRowDim);  // [576]
  for (int k = 0; k < kRowDim; ++k) row[static_cast<size_t>(k)] = base + static_cast<float>(k);
  return row;
}

TEST(KvPool, SizesSlotsAsSizePlusPage) {
  KvPool pool(10, 4, DType::BF16);
  EXPECT_EQ(pool.num_slots(), 14);
  EXPECT_EQ(pool.storage_elements(), 14 * 576);
}

TEST(KvPool, Bf16RoundsToNearestEvenOnce) {
  KvPool pool(4, 1, DType::BF16);
  std::vector<float> row(kRowDim, 0.f);  // [576]
  // bf16 keeps 7 explicit mantissa bits: the spacing just above 1 is 2^-7.
  row[0] = 1.0f + std::ldexp(1.0f, -8);      // exactly half-way: ties to even, to 1
  row[1] = 1.0f + 3 * std::ldexp(1.0f, -9);  // 3/4 of the spacing: up to 1 + 2^-7
  row[2] = 1.0f + std::ldexp(1.0f, -9);      // 1/4 of the spacing: down to 1
  row[3] = 1.0f + 3 * std::ldexp(1.0f, -8);  // half-way between 1+2^-7 (odd) and 1+2^-6: to even
  row[575] = -2.5f;                          // exact in bf16
  pool.write_row(2, row.data());
  auto back = pool.read_row(2);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(back[2], 1.0f);
  EXPECT_EQ(back[3], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(back[575], -2.5f);
  EXPECT_EQ(back[100], 0.f);
}

TEST(KvPool, F32StoresExactly) {
  KvPool pool(4, 1, DType::F32);
  std::vector<float> row(kRowDim);  // [576]
  for (int k = 0; k < kRowDim; ++k) row[static_cast<size_t>(k)] = 1.0f + std::ldexp(1.0f, -23) * k;
  pool.write_row(3, row.data());
  auto back = pool.read_row(3);
  for (int k = 0; k < kRowDim; ++k)
    EXPECT_EQ(back[static_cast<size_t>(k)], row[static_cast<size_t>(k)]);
}

TEST(KvPool, PaddedLatentFirstPlacement) {
  // Rows of 640 elements: slot s's c at s * 640, k_pe at s * 640 + 512; 64 padding elements.
  KvPool pool(4, 1, DType::BF16, KvLayout::latent_first(640));
  EXPECT_EQ(pool.storage_elements(), 5 * 640);
  auto row = ramp_row(0.f);  // integers 0..575, exact in bf16 up to 256, then even steps
  pool.write_row(3, row.data());
  EXPECT_EQ(bf16_bits_at(pool, 3 * 640 + 0), float_to_bf16(0.f).bits);
  EXPECT_EQ(bf16_bits_at(pool, 3 * 640 + 100), float_to_bf16(100.f).bits);
  EXPECT_EQ(bf16_bits_at(pool, 3 * 640 + 512), float_to_bf16(512.f).bits);
  EXPECT_EQ(bf16_bits_at(pool, 3 * 640 + 576), 0);  // padding untouched
  EXPECT_EQ(pool.element_index(3, 575), 3 * 640 + 575);
}

TEST(KvPool, RopeFirstPlacement) {
  // [k_pe | c]: c at s * 576 + 64, k_pe at s * 576.
  KvPool pool(4, 1, DType::BF16, KvLayout::rope_first());
  auto row = ramp_row(1.f);
  pool.write_row(2, row.data());
  EXPECT_EQ(bf16_bits_at(pool, 2 * 576 + 64), float_to_bf16(1.f).bits);   // c[0]
  EXPECT_EQ(bf16_bits_at(pool, 2 * 576 + 0), float_to_bf16(513.f).bits);  // k_pe[0]
  EXPECT_EQ(pool.read_row(2)[0], 1.f);
  EXPECT_EQ(pool.read_row(2)[512], round_bf16(513.f));
}

TEST(KvPool, SplitRegionsPlacement) {
  // n = 5 slots: ckv region [5, 512] then kpe region [5, 64].
  const KvLayout split = KvPool::split_regions(5);
  KvPool pool(4, 1, DType::BF16, split);
  EXPECT_EQ(pool.storage_elements(), 5 * 512 + 5 * 64);
  auto row = ramp_row(2.f);
  pool.write_row(4, row.data());
  EXPECT_EQ(bf16_bits_at(pool, 4 * 512 + 0), float_to_bf16(2.f).bits);
  EXPECT_EQ(bf16_bits_at(pool, 5 * 512 + 4 * 64 + 0), float_to_bf16(514.f).bits);
  EXPECT_EQ(pool.element_index(4, 575), 5 * 512 + 4 * 64 + 63);
}

TEST(KvPool, ElementIndexIsInt64PastTheInt32Limit) {
  // 2^31 / 576 = 3,728,270.2: slot 3,800,000 is past it. Products worked by hand:
  // 3,800,000 * 576 = 2,188,800,000; * 640 = 2,432,000,000; 4,000,000 * 512 = 2,048,000,000;
  // 3,800,000 * 64 = 243,200,000.
  const int64_t slot = 3'800'000;
  ASSERT_GT(slot, (int64_t{1} << 31) / 576);
  EXPECT_EQ(KvPool::element_index(KvLayout::latent_first(), slot, 575), 2'188'800'575);
  EXPECT_EQ(KvPool::element_index(KvLayout::latent_first(640), slot, 512), 2'432'000'512);
  EXPECT_EQ(KvPool::element_index(KvPool::split_regions(4'000'000), slot, 575),
            int64_t{2'048'000'000} + 243'200'000 + 63);
  EXPECT_GT(KvPool::element_index(KvLayout::latent_first(), slot, 0),
            std::numeric_limits<int32_t>::max());
}

TEST(KvPool, CopyRowIsBitExactAndFillNanPoisons) {
  KvPool pool(6, 1, DType::BF16);
  auto a = ramp_row(0.25f);
  auto b = ramp_row(-7.f);
  pool.write_row(1, a.data());
  pool.write_row(2, b.data());
  pool.copy_row(3, 1);
  EXPECT_EQ(pool.raw_row(3), pool.raw_row(1));
  EXPECT_NE(pool.raw_row(3), pool.raw_row(2));
  pool.fill_nan(1);
  for (float v : pool.read_row(1)) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(pool.read_row(3)[5], round_bf16(5.25f));  // copy does not alias its source
  EXPECT_FALSE(std::isnan(pool.read_row(2)[0]));
  pool.write_raw_row(4, pool.raw_row(2));
  EXPECT_EQ(pool.raw_row(4), pool.raw_row(2));
  pool.fill_nan_all();
  EXPECT_TRUE(std::isnan(pool.read_row(0)[0]));
}

TEST(KvPool, RejectsBadInput) {
  KvPool pool(4, 1, DType::BF16);  // slots 0..4
  std::vector<float> row(kRowDim, 0.f);
  expect_invalid([&] { pool.write_row(5, row.data()); }, "slot", 5);
  expect_invalid([&] { pool.write_row(-1, row.data()); }, "slot", -1);
  expect_invalid([&] { pool.write_row(1, nullptr); }, "row", -1);
  expect_invalid([&] { (void)pool.read_row(5); }, "slot", 5);
  expect_invalid([&] { pool.copy_row(1, 7); }, "slot", 7);
  expect_invalid([&] { pool.fill_nan(9); }, "slot", 9);
  expect_invalid([&] { (void)pool.element_index(1, 576); }, "k", 576);
  expect_invalid([&] { (void)pool.element_index(1, -1); }, "k", -1);
  expect_invalid([&] { pool.write_raw_row(1, std::vector<std::byte>(10)); }, "row", -1);
  expect_invalid([] { KvPool p(0, 1, DType::BF16); }, "size", -1);
  expect_invalid([] { KvPool p(4, 0, DType::BF16); }, "page_size", -1);
  expect_invalid([] { KvPool p(4, 1, static_cast<DType>(7)); }, "dtype", -1);
  expect_invalid([] { KvPool p(4, 1, DType::BF16, KvLayout::latent_first(575)); },
                 "layout.latent_stride", -1);
  // ckv rows 512 apart but the kpe region starts inside the ckv region: slots would overlap.
  expect_invalid([] { KvPool p(4, 1, DType::BF16, KvLayout::split(0, 512, 1000, 64)); }, "layout",
                 -1);
  expect_invalid([] { KvPool p(4, 1, DType::BF16, KvLayout::split(-1, 512, 5000, 64)); },
                 "layout.latent_offset", -1);
}

// ------------------------------------------------------------------------------ TokenAllocator

TEST(TokenAllocator, TakesFromTheFrontAndFailsCleanly) {
  TokenAllocator a(8);
  EXPECT_EQ(a.alloc(3), Slots({1, 2, 3}));
  EXPECT_EQ(a.alloc(6), std::nullopt);
  EXPECT_EQ(a.available(), 5);
  EXPECT_EQ(a.alloc(5), Slots({4, 5, 6, 7, 8}));
  EXPECT_EQ(a.available(), 0);
  EXPECT_EQ(a.alloc(1), std::nullopt);
  EXPECT_EQ(a.alloc(0), Slots{});
  a.check_accounting();
}

TEST(TokenAllocator, FreeAppends) {
  TokenAllocator a(6);
  ASSERT_TRUE(a.alloc(6));
  a.free(Slots{2, 5});
  a.free(Slots{1});
  EXPECT_EQ(a.alloc(3), Slots({2, 5, 1}));
  a.check_accounting();
}

TEST(TokenAllocator, NeedSortParksThenMergesSortedWhenShort) {
  TokenAllocator a(6);
  ASSERT_EQ(a.alloc(4), Slots({1, 2, 3, 4}));
  a.set_need_sort(true);
  a.free(Slots{3, 1});
  EXPECT_EQ(a.release_slots(), Slots({3, 1}));
  EXPECT_EQ(a.available(), 4);
  EXPECT_EQ(a.alloc(2), Slots({5, 6}));  // enough on the free list: no merge
  EXPECT_EQ(a.release_slots().size(), 2u);
  a.free(Slots{4});
  EXPECT_EQ(a.alloc(2), Slots({1, 3}));  // short: merge {3, 1, 4}, sort, take the first two
  EXPECT_TRUE(a.release_slots().empty());
  EXPECT_EQ(std::vector<int64_t>(a.free_slots().begin(), a.free_slots().end()), Slots({4}));
  a.check_accounting();
}

TEST(TokenAllocator, RejectsBadFreesWithoutChangingAnything) {
  TokenAllocator a(6);
  ASSERT_TRUE(a.alloc(3));
  expect_invalid([&] { a.free(Slots{0}); }, "slot", 0);
  expect_invalid([&] { a.free(Slots{7}); }, "slot", 7);
  expect_invalid([&] { a.free(Slots{-2}); }, "slot", -2);
  expect_invalid([&] { a.free(Slots{5}); }, "slot", 5);  // never handed out
  a.free(Slots{1});
  expect_invalid([&] { a.free(Slots{1}); }, "slot", 1);  // freed twice
  expect_invalid([&] { a.free(Slots{2, 2}); }, "slot", 2);
  expect_invalid([&] { a.free(Slots{3, 9}); }, "slot", 9);
  EXPECT_TRUE(a.is_allocated(2));
  EXPECT_TRUE(a.is_allocated(3));  // the rejected call freed nothing
  expect_invalid([&] { (void)a.alloc(-1); }, "n", -1);
  expect_invalid([] { TokenAllocator bad(0); }, "size", -1);
  expect_invalid([&] { a.rebuild(Slots{2, 2}); }, "slot", 2);
  a.check_accounting();
}

// Model-based: a std::set of free slots and the list of handed-out slots are trivially correct.
TEST(TokenAllocator, RandomSequencesMatchShadowAndNeverHandOutSlotZero) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    const int64_t size = 64;
    TokenAllocator a(size);
    std::set<int64_t> shadow_free;
    for (int64_t s = 1; s <= size; ++s) shadow_free.insert(s);
    std::vector<int64_t> held;
    for (int step = 0; step < 3000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        const int64_t n = static_cast<int64_t>(rng() % 12);
        auto got = a.alloc(n);
        ASSERT_EQ(got.has_value(), n <= static_cast<int64_t>(shadow_free.size())) << step;
        if (got) {
          ASSERT_EQ(static_cast<int64_t>(got->size()), n);
          for (int64_t s : *got) {
            ASSERT_NE(s, 0);
            ASSERT_EQ(shadow_free.erase(s), 1u) << "slot " << s << " handed out while taken";
            held.push_back(s);
          }
        }
      } else if (op < 9 && !held.empty()) {
        std::shuffle(held.begin(), held.end(), rng);
        const size_t k = 1 + rng() % held.size();
        Slots out(held.end() - static_cast<std::ptrdiff_t>(k), held.end());
        held.resize(held.size() - k);
        a.free(out);
        shadow_free.insert(out.begin(), out.end());
      } else {
        a.set_need_sort(rng() % 2 == 0);
      }
      ASSERT_EQ(a.available(), static_cast<int64_t>(shadow_free.size()));
      a.check_accounting();
    }
  }
}

// ------------------------------------------------------------------------------ PagedAllocator

std::vector<int64_t> pages_of(const std::deque<int64_t>& d) { return {d.begin(), d.end()}; }

// Worked by hand from docs/spec.md §4 with page_size 4, 32 slots: pages 1..8, page 0 = slots 0..3.
TEST(PagedAllocator, HandWorkedTailFillAndPrepend) {
  PagedAllocator a(32, 4);
  EXPECT_EQ(a.num_pages(), 8);
  // Request A: 0 -> 6 tokens: pages 1, 2; positions 0..5 at slots 4..9; slots 10, 11 reserved.
  EXPECT_EQ(a.alloc_extend(Slots{0}, Slots{6}, Slots{-1}), Slots({4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(a.committed(), 6);
  EXPECT_EQ(a.reserved(), 2);
  EXPECT_EQ(a.allocated(), 8);
  // A: 6 -> 13 tokens, last slot 9: tail 10, 11 first, then whole page 3 (12..15), then a new
  // partial page 4 holding position 12 at slot 16.
  EXPECT_EQ(a.alloc_extend(Slots{6}, Slots{13}, Slots{9}), Slots({10, 11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(a.committed(), 13);
  EXPECT_EQ(a.reserved(), 3);
  EXPECT_EQ(a.allocated(), 16);
  a.check_accounting();
  // Batch of two: A 13 -> 14 fills its tail slot 17 (no new page); B 0 -> 5 takes pages 5, 6.
  EXPECT_EQ(a.alloc_extend(Slots{13, 0}, Slots{14, 5}, Slots{16, -1}),
            Slots({17, 20, 21, 22, 23, 24}));
  EXPECT_EQ(pages_of(a.free_pages()), Slots({7, 8}));
  // Freeing one slot frees its whole page; freed pages go to the front.
  a.free(Slots{5});
  EXPECT_EQ(pages_of(a.free_pages()), Slots({1, 7, 8}));
  EXPECT_EQ(a.slot_state(4), PagedAllocator::SlotState::Free);
  EXPECT_EQ(a.alloc(4), Slots({4, 5, 6, 7}));
  // Unique pages, ascending, prepended together.
  a.free(Slots{24, 12, 13});
  EXPECT_EQ(pages_of(a.free_pages()), Slots({3, 6, 7, 8}));
  a.check_accounting();
  EXPECT_EQ(a.allocated(), a.committed() + a.reserved());
}

TEST(PagedAllocator, ReleasedTailIsRefilledFirst) {
  PagedAllocator a(32, 4);
  // 0 -> 7 tokens: slots 4..10 (pages 1, 2); 11 reserved.
  ASSERT_EQ(a.alloc_extend(Slots{0}, Slots{7}, Slots{-1}), Slots({4, 5, 6, 7, 8, 9, 10}));
  // Keep 5 tokens: positions 5, 6 (slots 9, 10) go back to reserved, page 2 stays.
  a.release_tail(Slots{9, 10});
  EXPECT_EQ(a.reserved(), 3);
  // 5 -> 7 again from last slot 8 reuses 9, 10: the partial-page tail is not stranded.
  EXPECT_EQ(a.alloc_extend(Slots{5}, Slots{7}, Slots{8}), Slots({9, 10}));
  EXPECT_EQ(pages_of(a.free_pages()), Slots({3, 4, 5, 6, 7, 8}));
  a.check_accounting();
}

TEST(PagedAllocator, PageSizeOneActsLikeTokens) {
  PagedAllocator a(5, 1);
  EXPECT_EQ(a.alloc_extend(Slots{0, 0}, Slots{2, 1}, Slots{-1, -1}), Slots({1, 2, 3}));
  a.free(Slots{2});
  EXPECT_EQ(a.alloc(2), Slots({2, 4}));  // prepended page 2 first
  a.check_accounting();
}

TEST(PagedAllocator, NeedSortParksPagesAndMergesWhenShort) {
  PagedAllocator a(16, 4);  // pages 1..4
  ASSERT_TRUE(a.alloc(16));
  a.set_need_sort(true);
  a.free(Slots{13});
  a.free(Slots{5});
  EXPECT_EQ(pages_of(a.release_pages()), Slots({1, 3}));  // prepended: page 1 then page 3
  EXPECT_EQ(a.available(), 8);
  EXPECT_EQ(a.alloc(4), Slots({4, 5, 6, 7}));  // short: merged and sorted {1, 3}
  EXPECT_EQ(pages_of(a.free_pages()), Slots({3}));
  a.check_accounting();
}

TEST(PagedAllocator, RejectsBadInputWithoutChangingAnything) {
  PagedAllocator a(32, 4);
  ASSERT_TRUE(a.alloc_extend(Slots{0}, Slots{6}, Slots{-1}));  // slots 4..9, 10/11 reserved
  // Token 5 belongs at page offset 1; slot 8 is offset 0. Slot 2 (a page id used as a slot id)
  // lies in the sink page.
  expect_invalid([&] { (void)a.alloc_extend(Slots{6}, Slots{8}, Slots{8}); }, "last_slots", 0);
  expect_invalid([&] { (void)a.alloc_extend(Slots{6}, Slots{8}, Slots{2}); }, "last_slots", 0);
  // Offset right but slot 13 is not handed out.
  expect_invalid([&] { (void)a.alloc_extend(Slots{6}, Slots{8}, Slots{13}); }, "last_slots", 0);
  // Two requests claiming the same tail: the second is at fault.
  expect_invalid(
      [&] {
        (void)a.alloc_extend(Slots{6, 6}, Slots{7, 7}, Slots{9, 9});
      },
      "last_slots", 1);
  expect_invalid([&] { (void)a.alloc_extend(Slots{-1}, Slots{2}, Slots{-1}); }, "prefix_lens", 0);
  expect_invalid(
      [&] {
        (void)a.alloc_extend(Slots{0, 6}, Slots{1, 5}, Slots{-1, 9});
      },
      "seq_lens", 1);
  expect_invalid([&] { (void)a.alloc_extend(Slots{0}, Slots{1, 2}, Slots{-1}); }, "seq_lens", -1);
  expect_invalid([&] { (void)a.alloc_extend(Slots{0}, Slots{1}, Slots{}); }, "last_slots", -1);
  expect_invalid([&] { (void)a.alloc(5); }, "need_size", -1);
  expect_invalid([&] { a.free(Slots{1}); }, "slot", 1);     // sink page
  expect_invalid([&] { a.free(Slots{36}); }, "slot", 36);   // past page 8
  expect_invalid([&] { a.free(Slots{10}); }, "slot", 10);   // reserved, never handed out
  expect_invalid([&] { a.free(Slots{20}); }, "slot", 20);   // free page
  expect_invalid([&] { a.free(Slots{4, 4}); }, "slot", 4);  // listed twice
  expect_invalid([&] { a.release_tail(Slots{11}); }, "slot", 11);
  EXPECT_EQ(a.committed(), 6);
  EXPECT_EQ(a.reserved(), 2);
  a.free(Slots{4});
  expect_invalid([&] { a.free(Slots{5}); }, "slot", 5);  // page 1 already freed with slot 4
  expect_invalid([] { PagedAllocator bad(32, 0); }, "page_size", -1);
  expect_invalid([] { PagedAllocator bad(3, 4); }, "size", -1);
  a.check_accounting();
}

// Model-based: requests as lists of slots per position; checks page alignment, exclusivity and
// accounting after every operation of a long random sequence.
TEST(PagedAllocator, RandomSequencesKeepPagesAlignedAndNeverUsePageZero) {
  for (int64_t ps : {1, 3, 4}) {
    std::mt19937_64 rng(100 + static_cast<uint64_t>(ps));
    PagedAllocator a(96, ps);
    std::map<int, Slots> reqs;  // request -> slot per position
    int next_req = 0;
    for (int step = 0; step < 2500; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 6) {
        // Extend up to three requests (new or existing) in one batch.
        Slots prefix, seq, last;
        std::vector<int> who;
        const int n = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < n; ++i) {
          int r;
          if (reqs.empty() || rng() % 3 == 0) {
            r = next_req++;
            reqs[r];
          } else {
            auto it = reqs.begin();
            std::advance(it, static_cast<long>(rng() % reqs.size()));
            r = it->first;
          }
          if (std::find(who.begin(), who.end(), r) != who.end()) continue;
          who.push_back(r);
          const Slots& s = reqs[r];
          prefix.push_back(static_cast<int64_t>(s.size()));
          seq.push_back(static_cast<int64_t>(s.size()) + static_cast<int64_t>(rng() % 7));
          last.push_back(s.empty() ? -1 : s.back());
        }
        auto got = a.alloc_extend(prefix, seq, last);
        if (got) {
          size_t at = 0;
          for (size_t i = 0; i < who.size(); ++i) {
            for (int64_t pos = prefix[i]; pos < seq[i]; ++pos) reqs[who[i]].push_back((*got)[at++]);
          }
          ASSERT_EQ(at, got->size());
        }
      } else if (op < 8 && !reqs.empty()) {
        auto it = reqs.begin();
        std::advance(it, static_cast<long>(rng() % reqs.size()));
        if (!it->second.empty()) a.free(it->second);
        reqs.erase(it);
      } else if (!reqs.empty()) {
        // Shrink a request to a shorter length inside its last kept page (the accept path).
        auto it = reqs.begin();
        std::advance(it, static_cast<long>(rng() % reqs.size()));
        Slots& s = it->second;
        if (s.size() > 1) {
          const int64_t keep = 1 + static_cast<int64_t>(rng() % (s.size() - 1));
          Slots tail, whole;
          for (int64_t pos = keep; pos < static_cast<int64_t>(s.size()); ++pos) {
            ((pos / ps == (keep - 1) / ps) ? tail : whole).push_back(s[static_cast<size_t>(pos)]);
          }
          a.release_tail(tail);
          a.free(whole);
          s.resize(static_cast<size_t>(keep));
        }
      }
      // Every live position: right page offset, one page per block, no slot twice, no page 0.
      std::set<int64_t> seen;
      std::map<int64_t, int> page_owner;
      for (const auto& [r, s] : reqs) {
        for (size_t pos = 0; pos < s.size(); ++pos) {
          ASSERT_GE(s[pos], ps) << "sink page handed out";
          ASSERT_EQ(s[pos] % ps, static_cast<int64_t>(pos) % ps);
          ASSERT_TRUE(seen.insert(s[pos]).second) << "slot " << s[pos] << " twice";
          auto [po, fresh] = page_owner.emplace(s[pos] / ps, r);
          ASSERT_TRUE(fresh || po->second == r) << "page shared";
          ASSERT_EQ(a.slot_state(s[pos]), PagedAllocator::SlotState::Committed);
        }
      }
      ASSERT_EQ(a.committed(), static_cast<int64_t>(seen.size()));
      ASSERT_EQ(a.allocated(), static_cast<int64_t>(page_owner.size()) * ps);
      a.check_accounting();
    }
  }
}

}  // namespace
}  // namespace mlaverify::model

// Tests of model/metadata.h: SGLang verify metadata against a 2-request example worked by hand,
// every rejection (field + index), and CUDA-graph padding rows exactly as docs/spec.md §3 says.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/metadata.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::catch_invalid;

// The example, on paper. req_to_token has 3 request rows (+ row 0) and 8 columns.
//   request 0 lives in row 2: P = 3, D = 2 (chain 0 <- 1);        row 2 = [10 11 12 | 20 21]
//   request 1 lives in row 1: P = 2, D = 3 (star 0 <- 1, 0 <- 2); row 1 = [30 31 | 40 41 42]
// ExtendRows (prefix only):
//   qo_indptr = [0, 2, 5]          (D = 2, 3)
//   kv_indptr = [0, 3, 5]          (P = 3, 2)
//   kv_indices = [10 11 12 30 31]  (row 2 cols 0..2, then row 1 cols 0..1)
// CacheSlots (prefix then draft slots):
//   kv_indptr = [0, 5, 10]
//   kv_indices = [10 11 12 20 21 30 31 40 41 42]
// positions = P + depth: request 0 depths 0,1 -> 3,4; request 1 depths 0,1,1 -> 2,3,3.
struct Example {
  ReqToToken rtt{3, 8};
  std::vector<int32_t> rows{2, 1};
  std::vector<int64_t> prefix{3, 2};
  std::vector<DraftTree> trees{DraftTree::chain(2), DraftTree::star(3)};
  Example() {
    const int32_t row2[] = {10, 11, 12, 20, 21};
    const int32_t row1[] = {30, 31, 40, 41, 42};
    for (int j = 0; j < 5; ++j) {
      rtt.set(2, j, row2[j]);
      rtt.set(1, j, row1[j]);
    }
  }
};

TEST(Metadata, HandWorkedExtendRows) {
  Example ex;
  VerifyMetadata m =
      build_metadata(ex.rtt, ex.rows, ex.prefix, ex.trees, DraftKvSource::ExtendRows);
  EXPECT_EQ(m.draft_source, DraftKvSource::ExtendRows);
  EXPECT_EQ(m.qo_indptr, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(m.kv_indptr, (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(m.kv_indices, (std::vector<int64_t>{10, 11, 12, 30, 31}));
  EXPECT_EQ(m.positions, (std::vector<int64_t>{3, 4, 2, 3, 3}));
  EXPECT_EQ(m.batch_size(), 2);
  EXPECT_EQ(m.total_q(), 5);
}

TEST(Metadata, HandWorkedCacheSlots) {
  Example ex;
  VerifyMetadata m =
      build_metadata(ex.rtt, ex.rows, ex.prefix, ex.trees, DraftKvSource::CacheSlots);
  EXPECT_EQ(m.qo_indptr, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(m.kv_indptr, (std::vector<int32_t>{0, 5, 10}));
  EXPECT_EQ(m.kv_indices, (std::vector<int64_t>{10, 11, 12, 20, 21, 30, 31, 40, 41, 42}));
  EXPECT_EQ(m.positions, (std::vector<int64_t>{3, 4, 2, 3, 3}));
}

TEST(Metadata, FromSizesHasNoPositions) {
  Example ex;
  const std::vector<int32_t> sizes = {2, 3};
  VerifyMetadata m = build_metadata(ex.rtt, ex.rows, ex.prefix, sizes, DraftKvSource::ExtendRows);
  EXPECT_EQ(m.kv_indices, (std::vector<int64_t>{10, 11, 12, 30, 31}));
  EXPECT_TRUE(m.positions.empty());
}

TEST(Metadata, Rejections) {
  Example ex;
  const auto ext = DraftKvSource::ExtendRows;
  const auto cache = DraftKvSource::CacheSlots;
  std::vector<int32_t> sizes = {2, 3};

  // Lengths disagree with bs = req_pool_indices.size() = 2.
  std::vector<int64_t> short_prefix = {3};
  auto e = catch_invalid([&] { build_metadata(ex.rtt, ex.rows, short_prefix, sizes, ext); });
  EXPECT_EQ(e.field(), "prefix_lens");
  EXPECT_EQ(e.index(), -1);
  std::vector<int32_t> long_sizes = {2, 3, 4};
  e = catch_invalid([&] { build_metadata(ex.rtt, ex.rows, ex.prefix, long_sizes, ext); });
  EXPECT_EQ(e.field(), "draft_sizes");
  EXPECT_EQ(e.index(), -1);
  std::vector<int32_t> no_rows;
  std::vector<int64_t> no_prefix;
  std::vector<int32_t> no_sizes;
  e = catch_invalid([&] { build_metadata(ex.rtt, no_rows, no_prefix, no_sizes, ext); });
  EXPECT_EQ(e.field(), "req_pool_indices");

  // Row 4 does not exist (rows 0..3).
  std::vector<int32_t> bad_rows = {2, 4};
  e = catch_invalid([&] { build_metadata(ex.rtt, bad_rows, ex.prefix, sizes, ext); });
  EXPECT_EQ(e.field(), "req_pool_indices");
  EXPECT_EQ(e.index(), 1);

  std::vector<int64_t> neg_prefix = {-1, 2};
  e = catch_invalid([&] { build_metadata(ex.rtt, ex.rows, neg_prefix, sizes, ext); });
  EXPECT_EQ(e.field(), "prefix_lens");
  EXPECT_EQ(e.index(), 0);

  std::vector<int32_t> zero_draft = {2, 0};
  e = catch_invalid([&] { build_metadata(ex.rtt, ex.rows, ex.prefix, zero_draft, ext); });
  EXPECT_EQ(e.field(), "draft_sizes");
  EXPECT_EQ(e.index(), 1);

  // P = 6 fits 8 columns on the ExtendRows path, but P + D = 6 + 3 = 9 does not on CacheSlots.
  std::vector<int64_t> long_prefix = {3, 6};
  EXPECT_NO_THROW(build_metadata(ex.rtt, ex.rows, long_prefix, sizes, ext));
  e = catch_invalid([&] { build_metadata(ex.rtt, ex.rows, long_prefix, sizes, cache); });
  EXPECT_EQ(e.field(), "prefix_lens");
  EXPECT_EQ(e.index(), 1);

  // A negative slot in a read entry: row 1, column 1 -> flat index 1 * 8 + 1 = 9.
  ReqToToken bad = ex.rtt;
  bad.set(1, 1, -3);
  e = catch_invalid([&] { build_metadata(bad, ex.rows, ex.prefix, sizes, ext); });
  EXPECT_EQ(e.field(), "req_to_token");
  EXPECT_EQ(e.index(), 9);
  // ... but a negative slot in an entry that is not read (row 1, column 5) is not an error.
  ReqToToken unread = ex.rtt;
  unread.set(1, 5, -3);
  EXPECT_NO_THROW(build_metadata(unread, ex.rows, ex.prefix, sizes, cache));

  e = catch_invalid(
      [&] { build_metadata(ex.rtt, ex.rows, ex.prefix, sizes, static_cast<DraftKvSource>(4)); });
  EXPECT_EQ(e.field(), "draft_source");
}

TEST(Metadata, Int32IndptrOverflowIsRejected) {
  // Two requests of D = 2^30 draft nodes: qo_indptr[2] would be 2^31 > INT32_MAX, so entry 2 is
  // refused. P = 0 on the ExtendRows path keeps kv_indices empty, so nothing large is allocated.
  // (The kv_indptr total goes through the same helper; reaching it needs a req_to_token row of
  // 2^30 int32 entries, 4 GB, too large for CI.)
  ReqToToken rtt(1, 4);
  const std::vector<int32_t> rows = {1, 1};
  const std::vector<int64_t> prefix = {0, 0};
  const std::vector<int32_t> sizes = {1 << 30, 1 << 30};
  auto e =
      catch_invalid([&] { build_metadata(rtt, rows, prefix, sizes, DraftKvSource::ExtendRows); });
  EXPECT_EQ(e.field(), "qo_indptr");
  EXPECT_EQ(e.index(), 2);
  EXPECT_NE(e.detail().find("overflows int32"), std::string::npos) << e.what();
}

TEST(GraphPadding, PadBatchSize) {
  const std::vector<int32_t> captured = {1, 2, 4, 8, 16, 24, 32};
  EXPECT_EQ(pad_batch_size(1, captured), 1);
  EXPECT_EQ(pad_batch_size(3, captured), 4);
  EXPECT_EQ(pad_batch_size(4, captured), 4);
  EXPECT_EQ(pad_batch_size(17, captured), 24);
  EXPECT_EQ(pad_batch_size(32, captured), 32);
  // Unsorted lists work: smallest captured >= bs.
  const std::vector<int32_t> unsorted = {16, 4, 8};
  EXPECT_EQ(pad_batch_size(5, unsorted), 8);

  auto e = catch_invalid([&] { pad_batch_size(33, captured); });
  EXPECT_EQ(e.field(), "batch_size");
  EXPECT_EQ(e.index(), -1);
  EXPECT_NE(e.detail().find("largest 32"), std::string::npos) << e.what();
  e = catch_invalid([&] { pad_batch_size(0, captured); });
  EXPECT_EQ(e.field(), "batch_size");
  const std::vector<int32_t> with_zero = {4, 0, 8};
  e = catch_invalid([&] { pad_batch_size(2, with_zero); });
  EXPECT_EQ(e.field(), "captured_sizes");
  EXPECT_EQ(e.index(), 1);
  const std::vector<int32_t> none;
  e = catch_invalid([&] { pad_batch_size(1, none); });
  EXPECT_EQ(e.field(), "batch_size");
}

// docs/spec.md §3: padded rows have P = 1, request row 0, cache slot 0, D = the batch's D.
TEST(GraphPadding, PaddedRowsAsSgLangFillsThem) {
  Example ex;
  const std::vector<int32_t> sizes = {2, 3};
  RequestRows rows = pad_requests(ex.rows, ex.prefix, sizes, 4);
  EXPECT_EQ(rows.req_pool_indices, (std::vector<int32_t>{2, 1, 0, 0}));
  EXPECT_EQ(rows.prefix_lens, (std::vector<int64_t>{3, 2, 1, 1}));
  EXPECT_EQ(rows.draft_sizes, (std::vector<int32_t>{2, 3, 3, 3}));  // batch D = max(2, 3)

  // CacheSlots: padded rows read req_to_token[0, 0 : 1 + 3], all slot 0:
  //   qo_indptr = [0, 2, 5, 8, 11], kv_indptr = [0, 5, 10, 14, 18], kv_indices[10:18] = 0.
  VerifyMetadata m = build_metadata(ex.rtt, rows.req_pool_indices, rows.prefix_lens,
                                    rows.draft_sizes, DraftKvSource::CacheSlots);
  EXPECT_EQ(m.qo_indptr, (std::vector<int32_t>{0, 2, 5, 8, 11}));
  EXPECT_EQ(m.kv_indptr, (std::vector<int32_t>{0, 5, 10, 14, 18}));
  EXPECT_EQ(m.kv_indices, (std::vector<int64_t>{10, 11, 12, 20, 21, 30, 31, 40, 41, 42,  //
                                                0, 0, 0, 0, 0, 0, 0, 0}));
  // ExtendRows: P = 1 each: kv_indptr = [0, 3, 5, 6, 7], one slot-0 entry per padded row.
  m = build_metadata(ex.rtt, rows.req_pool_indices, rows.prefix_lens, rows.draft_sizes,
                     DraftKvSource::ExtendRows);
  EXPECT_EQ(m.kv_indptr, (std::vector<int32_t>{0, 3, 5, 6, 7}));
  EXPECT_EQ(m.kv_indices, (std::vector<int64_t>{10, 11, 12, 30, 31, 0, 0}));

  // No padding asked: unchanged.
  RequestRows same = pad_requests(ex.rows, ex.prefix, sizes, 2);
  EXPECT_EQ(same.req_pool_indices, ex.rows);
  auto e = catch_invalid([&] { pad_requests(ex.rows, ex.prefix, sizes, 1); });
  EXPECT_EQ(e.field(), "padded_bs");
  EXPECT_EQ(e.index(), -1);
}

// Byte ranges of padded rows per format, for real rows {D=2, P=3}, {D=3, P=2} padded to 4 rows
// of {D=3, P=1}; worked out per format in each comment.
TEST(GraphPadding, PaddedMaskBytesPerFormat) {
  std::vector<DraftTree> trees = {DraftTree::chain(2), DraftTree::star(3), DraftTree::chain(3),
                                  DraftTree::chain(3)};
  const std::vector<int64_t> prefix = {3, 2, 1, 1};
  struct Want {
    MaskFormat f;
    int64_t begin, end;
  };
  const Want wants[] = {
      // FullMask: D(P+D) elements = 2*5 = 10, 3*5 = 15, then 3*4 = 12 twice: [25, 49).
      {MaskFormat::FullMask, 25, 49},
      // FlashInfer: ceil(10/8) = 2, ceil(15/8) = 2, ceil(12/8) = 2 twice: [4, 8).
      {MaskFormat::FlashInferPacked, 4, 8},
      // QlenOnly [bs, 3, 3]: rows 2, 3 are bytes [18, 36).
      {MaskFormat::QlenOnly, 18, 36},
      // QlenOnlyBitpacking with 4-byte words [bs, 3]: [2*3*4, 4*3*4) = [24, 48).
      {MaskFormat::QlenOnlyBitpacking, 24, 48},
      // DraftBits [T = 11, ceil(3/32) = 1] uint32: real tokens 0..4, so bytes [20, 44).
      {MaskFormat::DraftBits, 20, 44},
  };
  for (const Want& w : wants) {
    for (IndptrConvention conv : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
      EncodedMask m = encode_mask(w.f, trees, prefix, conv, 4);
      const ByteRange r = padded_mask_bytes(m, 2, 5);
      EXPECT_EQ(r.begin, w.begin) << static_cast<int>(w.f);
      EXPECT_EQ(r.end, w.end) << static_cast<int>(w.f);

      // Scribbling changes only that range, and (with 24+ random bytes) changes it.
      EncodedMask scribbled = m;
      scribble_padded_mask(scribbled, 2, 5, 1234);
      ASSERT_EQ(scribbled.data.size(), m.data.size());
      int64_t changed = 0;
      for (int64_t b = 0; b < static_cast<int64_t>(m.data.size()); ++b) {
        const bool differs =
            scribbled.data[static_cast<size_t>(b)] != m.data[static_cast<size_t>(b)];
        if (b < r.begin) {
          EXPECT_FALSE(differs) << "real row byte " << b << " touched, format "
                                << static_cast<int>(w.f);
        } else {
          changed += differs;
        }
      }
      // Each garbage byte equals the old one with probability 1/256 at most (the old bytes are 0/1
      // or packed bits); P(fewer than half of >= 4 bytes change) < 6 * 256^-2: not flaky.
      EXPECT_GE(2 * changed, r.end - r.begin) << static_cast<int>(w.f);
      EXPECT_EQ(scribbled.indptr, m.indptr);
    }
  }
}

TEST(GraphPadding, NoPaddedRowsMeansEmptyRange) {
  std::vector<DraftTree> trees = {DraftTree::chain(2), DraftTree::star(3)};
  const std::vector<int64_t> prefix = {3, 2};
  for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::FlashInferPacked, MaskFormat::QlenOnly,
                       MaskFormat::QlenOnlyBitpacking, MaskFormat::DraftBits}) {
    EncodedMask m = encode_mask(f, trees, prefix, IndptrConvention::Csr, 4);
    const ByteRange r = padded_mask_bytes(m, 2, 5);
    EXPECT_EQ(r.begin, r.end) << static_cast<int>(f);
    EXPECT_EQ(r.end, static_cast<int64_t>(m.data.size()));
  }
}

TEST(GraphPadding, ScribbledPositionsLeaveRealTokens) {
  std::vector<int64_t> pos = {3, 4, 2, 3, 3, 1, 2, 2, 1, 2, 2};  // 5 real, 6 padded
  const std::vector<int64_t> before = pos;
  scribble_padded_positions(pos, 5, 99);
  for (size_t t = 0; t < 5; ++t) EXPECT_EQ(pos[t], before[t]);
  int changed = 0;
  for (size_t t = 5; t < pos.size(); ++t) changed += pos[t] != before[t];
  // A 64-bit garbage value equals a small position with probability 2^-64.
  EXPECT_EQ(changed, 6);
}

TEST(SplitMix64, KnownSequenceAndBelow) {
  // Reference values of splitmix64 from seed 0 (Vigna's published reference output; the first
  // three outputs are widely quoted test vectors).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.next(), 0x06c45d188009454full);
  SplitMix64 r2(5);
  for (int k = 0; k < 1000; ++k) EXPECT_LT(r2.below(7), 7u);
}

}  // namespace
}  // namespace mlaverify::model

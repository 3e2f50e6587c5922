// Tests of model/mask.h: every docs/spec.md §3 mask format round-trips through a VerifyParams, the
// bit order is pinned to little-endian per request, and every malformed mask is rejected by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "mlaverify/verify_params.h"
#include "model/mask.h"
#include "model/tree.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::expect_invalid;

using C = IndptrConvention;
using F = MaskFormat;

DraftTree random_tree(int32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> parent(n);  // [D]
  parent[0] = -1;
  for (int32_t t = 1; t < n; ++t) {
    parent[t] = std::uniform_int_distribution<int32_t>(0, t - 1)(rng);
  }
  return DraftTree::from_parents(parent);
}

// The metadata a mask decoder reads, built by hand: qo_indptr from the tree sizes, kv_indptr from
// the prefix lengths (ExtendRows: kv length P_i; CacheSlots: P_i + D_i), the mask attached.
// Held by pointer: p points into the vectors.
struct Launch {
  std::vector<int32_t> qo_indptr;  // [bs + 1]
  std::vector<int32_t> kv_indptr;  // [bs + 1]
  EncodedMask mask;
  VerifyParams p;
};

std::unique_ptr<Launch> make_launch(const std::vector<DraftTree>& trees,
                                    const std::vector<int64_t>& prefix_lens, F format,
                                    C conv = C::Csr, int32_t word_bytes = 4,
                                    DraftKvSource source = DraftKvSource::ExtendRows) {
  auto l = std::make_unique<Launch>();
  const int32_t bs = static_cast<int32_t>(trees.size());
  l->qo_indptr.assign(bs + 1, 0);
  l->kv_indptr.assign(bs + 1, 0);
  int32_t max_d = 0;
  for (int32_t i = 0; i < bs; ++i) {
    l->qo_indptr[i + 1] = l->qo_indptr[i] + trees[i].size();
    int64_t kv_len = prefix_lens[i] + (source == DraftKvSource::CacheSlots ? trees[i].size() : 0);
    l->kv_indptr[i + 1] = l->kv_indptr[i] + static_cast<int32_t>(kv_len);
    max_d = std::max(max_d, trees[i].size());
  }
  l->mask = encode_mask(format, trees, prefix_lens, conv, word_bytes);
  l->p.batch_size = bs;
  l->p.max_draft = max_d;
  l->p.max_total_q = l->qo_indptr[bs];
  l->p.qo_indptr = l->qo_indptr.data();
  l->p.kv_indptr = l->kv_indptr.data();
  l->p.draft_source = source;
  attach_mask(l->p, l->mask);
  return l;
}

std::vector<int32_t> parents_of(const std::vector<DraftTree>& trees, size_t i) {
  return trees[i].parents();
}

const std::vector<int32_t> kSizes = {1, 2, 3, 31, 32, 33, 63, 64, 65, 127, 128, 1000, 1024};
const std::vector<int64_t> kPrefixes = {0, 1, 63, 64, 65};

struct FormatCase {
  F format;
  C conv;
  int32_t word_bytes;
};
// Every format, both indptr conventions where an indptr exists, every bitpacking word size.
const std::vector<FormatCase> kFormats = {
    {F::FullMask, C::Csr, 4},           {F::FullMask, C::OffsetsOnly, 4},
    {F::FlashInferPacked, C::Csr, 4},   {F::FlashInferPacked, C::OffsetsOnly, 4},
    {F::QlenOnly, C::Csr, 4},           {F::QlenOnlyBitpacking, C::Csr, 1},
    {F::QlenOnlyBitpacking, C::Csr, 2}, {F::QlenOnlyBitpacking, C::Csr, 4},
    {F::DraftBits, C::Csr, 4},
};

bool fits(const FormatCase& fc, int32_t max_d) {
  return fc.format != F::QlenOnlyBitpacking || max_d <= 8 * fc.word_bytes;
}

std::string describe(const FormatCase& fc) {
  return "format " + std::to_string(static_cast<int>(fc.format)) + " conv " +
         std::to_string(static_cast<int>(fc.conv)) + " word " + std::to_string(fc.word_bytes);
}

TEST(Mask, EveryFormatRoundTripsSingleRequests) {
  for (int32_t n : kSizes) {
    const std::vector<DraftTree> shapes = {random_tree(n, 31 * n + 7), DraftTree::chain(n),
                                           DraftTree::star(n)};
    for (const DraftTree& tree : shapes) {
      for (int64_t prefix : kPrefixes) {
        for (const FormatCase& fc : kFormats) {
          if (!fits(fc, n)) continue;
          std::vector<DraftTree> trees{tree};
          auto l = make_launch(trees, {prefix}, fc.format, fc.conv, fc.word_bytes);
          std::vector<DraftTree> back = decode_trees(l->p);
          ASSERT_EQ(back.size(), 1u);
          ASSERT_EQ(back[0].parents(), tree.parents())
              << describe(fc) << " n=" << n << " P=" << prefix;
        }
      }
    }
  }
}

TEST(Mask, EveryFormatRoundTripsMixedBatches) {
  // One batch per shape holding every size, prefix lengths cycling through the edge values, so
  // request offsets, CSR sums and DraftBits row indices are exercised across requests.
  for (int shape = 0; shape < 3; ++shape) {
    std::vector<DraftTree> trees;
    std::vector<int64_t> prefixes;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      int32_t n = kSizes[k];
      trees.push_back(shape == 0   ? random_tree(n, 500 + n)
                      : shape == 1 ? DraftTree::chain(n)
                                   : DraftTree::star(n));
      prefixes.push_back(kPrefixes[k % kPrefixes.size()]);
    }
    for (const FormatCase& fc : kFormats) {
      if (!fits(fc, 1024)) continue;
      for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
        auto l = make_launch(trees, prefixes, fc.format, fc.conv, fc.word_bytes, src);
        std::vector<DraftTree> back = decode_trees(l->p);
        ASSERT_EQ(back.size(), trees.size());
        for (size_t i = 0; i < trees.size(); ++i) {
          ASSERT_EQ(back[i].parents(), parents_of(trees, i))
              << describe(fc) << " shape " << shape << " request " << i;
        }
      }
    }
  }
  // Bitpacking needs D <= 32: a batch of small trees.
  std::vector<DraftTree> small;
  std::vector<int64_t> small_prefixes;
  for (int32_t n : {1, 2, 3, 8, 9, 16, 17, 31, 32}) {
    small.push_back(random_tree(n, 900 + n));
    small_prefixes.push_back(kPrefixes[n % kPrefixes.size()]);
  }
  for (const FormatCase& fc : kFormats) {
    if (fc.format != F::QlenOnlyBitpacking || !fits(fc, 32)) continue;
    auto l = make_launch(small, small_prefixes, fc.format, fc.conv, fc.word_bytes);
    std::vector<DraftTree> back = decode_trees(l->p);
    for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(back[i].parents(), small[i].parents());
  }
}

TEST(Mask, DraftBlockAndMaskVisibleAgreeWithTheTree) {
  std::vector<DraftTree> trees = {random_tree(40, 1), DraftTree::chain(7), random_tree(70, 2)};
  std::vector<int64_t> prefixes = {3, 0, 64};
  for (const FormatCase& fc : kFormats) {
    if (fc.format == F::QlenOnlyBitpacking) continue;  // D = 70 > 32
    auto l = make_launch(trees, prefixes, fc.format, fc.conv, fc.word_bytes);
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(draft_block(l->p, i) == trees[i].ancestor_bits()) << describe(fc);
      for (int32_t t = 0; t < trees[i].size(); ++t) {
        for (int32_t j = 0; j < trees[i].size(); ++j) {
          ASSERT_EQ(mask_visible(l->p, i, t, j), trees[i].visible(t, j)) << describe(fc);
        }
      }
    }
  }
}

// The hand-worked example pinning the bit order. Tree 0 <- 1, 0 <- 2 (parents [-1, 0, 0]), P = 2.
// Draft block (row t = query, column j): row 0 = 100, row 1 = 110, row 2 = 101.
// FULL_MASK rows [P + D = 5 columns], prefix columns ones:
//   row 0: 1 1 | 1 0 0
//   row 1: 1 1 | 1 1 0
//   row 2: 1 1 | 1 0 1
// FlashInfer: the 15 elements row-major, element k -> bit k % 8 of byte k / 8 (little-endian):
//   k:   0 1 2 3 4 5 6 7 | 8 9 10 11 12 13 14 (15 = padding 0)
//   bit: 1 1 1 0 0 1 1 1 | 1 0  1  1  1  0  1  0
//   byte 0 = 1 + 2 + 4 + 32 + 64 + 128 = 231 = 0xE7
//   byte 1 = 1 + 4 + 8 + 16 + 64       =  93 = 0x5D
// (Big-endian within the byte would give 0xE7, 0xBA: byte 0 is a palindrome, byte 1 is not.)
// Bitpacking / DraftBits words, bit j = column j: row 0 = 1, row 1 = 1 + 2 = 3, row 2 = 1 + 4 = 5.
TEST(Mask, HandWorkedLittleEndianExample) {
  std::vector<DraftTree> trees = {DraftTree::from_parents({-1, 0, 0})};
  std::vector<int64_t> prefixes = {2};

  EncodedMask full = encode_mask(F::FullMask, trees, prefixes);
  EXPECT_EQ(full.data, (std::vector<uint8_t>{1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1}));
  EXPECT_EQ(full.len, 15);
  EXPECT_EQ(full.indptr, (std::vector<int64_t>{0, 15}));

  EncodedMask fi = encode_mask(F::FlashInferPacked, trees, prefixes);
  EXPECT_EQ(fi.data, (std::vector<uint8_t>{0xE7, 0x5D}));
  EXPECT_EQ(fi.len, 2);
  EXPECT_EQ(fi.indptr, (std::vector<int64_t>{0, 2}));  // bytes

  EncodedMask ql = encode_mask(F::QlenOnly, trees, prefixes);
  EXPECT_EQ(ql.data, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(ql.draft_stride, 3);

  EncodedMask b1 = encode_mask(F::QlenOnlyBitpacking, trees, prefixes, C::Csr, 1);
  EXPECT_EQ(b1.data, (std::vector<uint8_t>{1, 3, 5}));
  EncodedMask b2 = encode_mask(F::QlenOnlyBitpacking, trees, prefixes, C::Csr, 2);
  EXPECT_EQ(b2.data, (std::vector<uint8_t>{1, 0, 3, 0, 5, 0}));  // low byte first
  EXPECT_EQ(b2.len, 6);

  EncodedMask db = encode_mask(F::DraftBits, trees, prefixes);
  EXPECT_EQ(db.data, (std::vector<uint8_t>{1, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(db.len, 3);  // uint32 words
  EXPECT_EQ(db.draft_stride, 1);
}

// Bits that cross a byte or word boundary. A chain of 9: the last row sees columns 0..8, i.e.
// 0x1FF: low byte 0xFF, high byte 0x01. A chain of 33: the last row is word 0 = 0xFFFFFFFF,
// word 1 = 0x00000001 (column 32 is bit 0 of the second word).
TEST(Mask, HandWorkedWordBoundaries) {
  std::vector<DraftTree> c9 = {DraftTree::chain(9)};
  EncodedMask b2 = encode_mask(F::QlenOnlyBitpacking, c9, std::vector<int64_t>{0}, C::Csr, 2);
  ASSERT_EQ(b2.data.size(), 18u);
  EXPECT_EQ(b2.data[16], 0xFF);
  EXPECT_EQ(b2.data[17], 0x01);
  std::vector<DraftTree> c33 = {DraftTree::chain(33)};
  EncodedMask db = encode_mask(F::DraftBits, c33, std::vector<int64_t>{5});
  EXPECT_EQ(db.draft_stride, 2);
  EXPECT_EQ(db.len, 66);
  const size_t last_row = 32 * 2 * 4;  // byte offset of row 32
  EXPECT_EQ(std::vector<uint8_t>(db.data.begin() + last_row, db.data.end()),
            (std::vector<uint8_t>{0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0x00}));
}

// Writes `m`'s bits again with the bit order reversed inside every byte (big-endian bit order).
std::vector<uint8_t> reverse_bits_in_bytes(std::vector<uint8_t> bytes) {
  for (uint8_t& b : bytes) {
    uint8_t r = 0;
    for (int k = 0; k < 8; ++k) r |= ((b >> k) & 1) << (7 - k);
    b = r;
  }
  return bytes;
}

// Byte-swaps every `word`-byte word (big-endian word order).
std::vector<uint8_t> swap_words(std::vector<uint8_t> bytes, int word) {
  for (size_t w = 0; w + word <= bytes.size(); w += word) {
    std::reverse(bytes.begin() + w, bytes.begin() + w + word);
  }
  return bytes;
}

// Decoding a wrongly ordered buffer must not reproduce the original trees: it either fails as a
// non-tree or yields different trees. If the decoder read big-endian, these would round-trip.
void expect_not_original(Launch& l, const std::vector<uint8_t>& wrong,
                         const std::vector<DraftTree>& trees, const std::string& what) {
  l.mask.data = wrong;
  l.p.mask = l.mask.data.data();
  try {
    std::vector<DraftTree> back = decode_trees(l.p);
    bool same = back.size() == trees.size();
    for (size_t i = 0; same && i < trees.size(); ++i) same = back[i] == trees[i];
    EXPECT_FALSE(same) << what << ": a mis-ordered encoding decoded to the original trees";
  } catch (const InvalidInput&) {
    SUCCEED();
  }
}

TEST(Mask, BigEndianEncodingsDoNotDecodeToTheOriginal) {
  {
    std::vector<DraftTree> trees = {DraftTree::from_parents({-1, 0, 0})};
    auto l = make_launch(trees, {2}, F::FlashInferPacked);
    std::vector<uint8_t> be = reverse_bits_in_bytes(l->mask.data);
    EXPECT_EQ(be, (std::vector<uint8_t>{0xE7, 0xBA}));  // as worked out above
    expect_not_original(*l, be, trees, "FlashInfer hand example, big-endian bits");
  }
  for (uint64_t seed = 0; seed < 20; ++seed) {
    // Max D 16 so that 2-byte bitpacking words hold every row.
    std::vector<DraftTree> trees = {random_tree(5 + static_cast<int32_t>(seed % 12), seed),
                                    random_tree(16, 100 + seed)};
    std::vector<int64_t> prefixes = {static_cast<int64_t>(seed % 3), 1};
    auto fi = make_launch(trees, prefixes, F::FlashInferPacked);
    expect_not_original(*fi, reverse_bits_in_bytes(fi->mask.data), trees, "FlashInfer bits");
    for (int32_t wb : {2, 4}) {
      auto bp = make_launch(trees, prefixes, F::QlenOnlyBitpacking, C::Csr, wb);
      expect_not_original(*bp, swap_words(bp->mask.data, wb), trees, "bitpacking word order");
      expect_not_original(*bp, reverse_bits_in_bytes(bp->mask.data), trees, "bitpacking bits");
    }
    auto db = make_launch(trees, prefixes, F::DraftBits);
    expect_not_original(*db, swap_words(db->mask.data, 4), trees, "DraftBits word order");
    expect_not_original(*db, reverse_bits_in_bytes(db->mask.data), trees, "DraftBits bits");
  }
}

// FlashInfer packs per request, each padded to a whole byte (docs/spec.md §7.13). A globally packed
// stream (request i starts at bit sum_{k<i} D_k (P_k + D_k), no padding) with byte offsets rounded
// down must not decode to the original batch. Request 0 is the hand example: 15 bits, so request
// 1 starts at bit 15, one bit before the byte boundary its offset names.
TEST(Mask, GloballyPackedFlashInferDoesNotDecodeToTheOriginal) {
  std::vector<DraftTree> trees = {DraftTree::from_parents({-1, 0, 0}), random_tree(10, 3),
                                  DraftTree::chain(6)};
  std::vector<int64_t> prefixes = {2, 3, 1};
  for (C conv : {C::Csr, C::OffsetsOnly}) {
    auto l = make_launch(trees, prefixes, F::FlashInferPacked, conv);
    std::vector<uint8_t> global(l->mask.data.size(), 0);
    std::vector<int64_t> starts;
    int64_t bit = 0;
    for (size_t i = 0; i < trees.size(); ++i) {
      const int64_t d = trees[i].size();
      const int64_t p = prefixes[i];
      starts.push_back(bit / 8);
      for (int64_t t = 0; t < d; ++t) {
        for (int64_t c = 0; c < p + d; ++c, ++bit) {
          if (c < p || trees[i].visible(static_cast<int32_t>(t), static_cast<int32_t>(c - p))) {
            global[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
          }
        }
      }
    }
    if (conv == C::Csr) starts.push_back((bit + 7) / 8);
    l->mask.indptr = starts;
    l->p.mask_indptr = l->mask.indptr.data();
    expect_not_original(*l, global, trees, "globally packed FlashInfer");
  }
}

// docs/spec.md §2: a chain is causal attention with the bottom-right rule, kv j (of P + D) visible
// to query i iff j <= P + i. Checked on the FULL_MASK and FlashInfer buffers element by element
// (prefix columns included), and on the decoded block of every format.
TEST(Mask, ChainIsBottomRightCausal) {
  for (int32_t d : {1, 2, 4, 8, 33}) {
    for (int64_t p : {0, 1, 5, 64}) {
      std::vector<DraftTree> trees = {DraftTree::chain(d)};
      const int64_t cols = p + d;
      EncodedMask full = encode_mask(F::FullMask, trees, std::vector<int64_t>{p});
      EncodedMask fi = encode_mask(F::FlashInferPacked, trees, std::vector<int64_t>{p});
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const bool causal = j <= p + i;
          const int64_t k = i * cols + j;
          ASSERT_EQ(full.data[k] != 0, causal) << "d=" << d << " p=" << p;
          ASSERT_EQ(((fi.data[k / 8] >> (k % 8)) & 1) != 0, causal) << "d=" << d << " p=" << p;
        }
      }
      for (const FormatCase& fc : kFormats) {
        if (!fits(fc, d)) continue;
        auto l = make_launch(trees, {p}, fc.format, fc.conv, fc.word_bytes);
        BitRows block = draft_block(l->p, 0);
        for (int32_t i = 0; i < d; ++i) {
          for (int32_t j = 0; j < d; ++j) ASSERT_EQ(block.test(i, j), p + j <= p + i);
        }
      }
    }
  }
}

// A CSR mask_indptr read under the offsets-only convention names the same starts ([:bs] of a
// [bs+1] array), so the decoder must read identical blocks; only the Csr checks differ.
TEST(Mask, BothIndptrConventionsReadTheSameStarts) {
  std::vector<DraftTree> trees = {random_tree(12, 8), DraftTree::star(5), DraftTree::chain(3)};
  std::vector<int64_t> prefixes = {64, 0, 7};
  for (F f : {F::FullMask, F::FlashInferPacked}) {
    auto csr = make_launch(trees, prefixes, f, C::Csr);
    VerifyParams as_offsets = csr->p;
    as_offsets.mask_indptr_convention = C::OffsetsOnly;
    validate_mask(as_offsets);
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(draft_block(as_offsets, i) == draft_block(csr->p, i));
    }
  }
}

TEST(Mask, EncodeRejectsBadInput) {
  std::vector<DraftTree> one = {DraftTree::chain(4)};
  std::vector<DraftTree> none;
  expect_invalid([&] { encode_mask(F::FullMask, none, std::vector<int64_t>{}); }, "trees", -1);
  expect_invalid(
      [&] {
        encode_mask(F::FullMask, one, std::vector<int64_t>{1, 2});
      },
      "prefix_lens", -1);
  std::vector<DraftTree> two = {DraftTree::chain(4), DraftTree::chain(2)};
  expect_invalid(
      [&] {
        encode_mask(F::QlenOnly, two, std::vector<int64_t>{0, -1});
      },
      "prefix_lens", 1);
  std::vector<DraftTree> wide = {DraftTree::chain(4), DraftTree::star(33)};
  expect_invalid(
      [&] {
        encode_mask(F::QlenOnlyBitpacking, wide, std::vector<int64_t>{0, 0});
      },
      "trees", 1);
  expect_invalid(
      [&] { encode_mask(F::QlenOnlyBitpacking, one, std::vector<int64_t>{0}, C::Csr, 3); },
      "word_bytes", -1);
  std::vector<DraftTree> nine = {DraftTree::chain(9)};
  expect_invalid(
      [&] { encode_mask(F::QlenOnlyBitpacking, nine, std::vector<int64_t>{0}, C::Csr, 1); },
      "word_bytes", -1);
  expect_invalid([&] { encode_mask(static_cast<F>(9), one, std::vector<int64_t>{0}); }, "format",
                 -1);
  expect_invalid([&] { encode_mask(F::FullMask, one, std::vector<int64_t>{0}, static_cast<C>(5)); },
                 "conv", -1);
  // D * (P + D) overflows int64: rejected before any allocation.
  expect_invalid([&] { encode_mask(F::FullMask, one, std::vector<int64_t>{INT64_MAX / 2}); },
                 "prefix_lens", 0);
}

// A fresh, valid three-request launch for the rejection tests below.
std::unique_ptr<Launch> three(F f, C conv = C::Csr, int32_t wb = 4) {
  std::vector<DraftTree> trees = {DraftTree::from_parents({-1, 0, 0}), DraftTree::chain(5),
                                  random_tree(9, 4)};
  return make_launch(trees, {2, 0, 11}, f, conv, wb);
}

TEST(Mask, ValidateAcceptsEveryEncodedFormat) {
  for (const FormatCase& fc : kFormats) {
    if (!fits(fc, 9)) continue;
    EXPECT_NO_THROW(validate_mask(three(fc.format, fc.conv, fc.word_bytes)->p)) << describe(fc);
  }
}

TEST(Mask, ValidateRejectsNullPointersAndBadScalars) {
  {
    auto l = three(F::FullMask);
    l->p.mask = nullptr;
    expect_invalid([&] { validate_mask(l->p); }, "mask", -1);
    expect_invalid([&] { (void)draft_block(l->p, 0); }, "mask", -1);
  }
  for (F f : {F::FullMask, F::FlashInferPacked}) {
    auto l = three(f);
    l->p.mask_indptr = nullptr;
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", -1);
  }
  {
    auto l = three(F::QlenOnly);
    l->p.mask_len = -1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1);
  }
  {
    auto l = three(F::QlenOnly);
    l->p.mask_format = static_cast<F>(7);
    expect_invalid([&] { validate_mask(l->p); }, "mask_format", -1);
  }
  {
    auto l = three(F::FullMask);
    l->p.mask_indptr_convention = static_cast<C>(3);
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr_convention", -1);
  }
}

TEST(Mask, ValidateRejectsBadCsrIndptr) {
  {  // not starting at 0: offsets into a larger buffer passed as CSR
    auto l = three(F::FullMask);
    for (int64_t& v : l->mask.indptr) v += 1;
    l->mask.len += 1;
    l->p.mask_len = l->mask.len;
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 0, "start at 0");
  }
  {  // request 1's segment one element too long
    auto l = three(F::FullMask);
    l->mask.indptr[2] += 1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 1, "expected");
  }
  {  // decreasing entry 2
    auto l = three(F::FullMask);
    l->mask.indptr[2] = l->mask.indptr[1] - 1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 2, "non-decreasing");
  }
  {  // the last segment runs past mask_len
    auto l = three(F::FlashInferPacked);
    l->p.mask_len -= 1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 2, "outside");
  }
  {  // FlashInfer handed the FULL_MASK (element-count) indptr: request 0 spans 15 entries, not 2
    auto l = three(F::FlashInferPacked);
    auto full = three(F::FullMask);
    l->mask.indptr = full->mask.indptr;
    l->p.mask_indptr = l->mask.indptr.data();
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 0);
  }
  {  // row stride D instead of P + D (docs/spec.md §7.5): segments sized D * D fail the size check
    auto l = three(F::FullMask);
    l->mask.indptr = {0, 9, 34, 115};
    l->p.mask_indptr = l->mask.indptr.data();
    expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 0, "expected");
  }
}

TEST(Mask, ValidateRejectsBadOffsetsOnlyIndptr) {
  for (F f : {F::FullMask, F::FlashInferPacked}) {
    {
      auto l = three(f, C::OffsetsOnly);
      ASSERT_EQ(l->mask.indptr.size(), 3u);  // [bs]
      l->mask.indptr[2] = l->mask.indptr[1] - 1;
      expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 2, "non-decreasing");
    }
    {
      auto l = three(f, C::OffsetsOnly);
      l->mask.indptr[2] += 1;  // last segment now ends one past the buffer
      expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 2, "outside");
    }
    {
      auto l = three(f, C::OffsetsOnly);
      l->mask.indptr[0] = -4;
      expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 0);
    }
    {  // an absurd start must not overflow the bounds arithmetic
      auto l = three(f, C::OffsetsOnly);
      l->mask.indptr[2] = INT64_MAX - 3;
      expect_invalid([&] { validate_mask(l->p); }, "mask_indptr", 2);
    }
  }
}

TEST(Mask, ValidateRejectsStridesAndShortBuffers) {
  {  // QlenOnly: stride 4 < D_2 = 9 (request 2 is the widest)
    auto l = three(F::QlenOnly);
    l->p.mask_draft_stride = 4;
    expect_invalid([&] { validate_mask(l->p); }, "mask_draft_stride", 1);  // D_1 = 5 > 4 first
    l->p.mask_draft_stride = 6;
    expect_invalid([&] { validate_mask(l->p); }, "mask_draft_stride", 2);
  }
  {
    auto l = three(F::QlenOnly);
    l->p.mask_len -= 1;  // the last byte request 2 reads is (2*9 + 8) * 9 + 8 = 242 = len - 1
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1);
  }
  {  // a huge stride: request 0 already reads past the buffer
    auto l = three(F::QlenOnly);
    l->p.mask_draft_stride = INT32_MAX;
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1, "reads up to");
    // With a claimed capacity of INT64_MAX, request 2's last read 2 S^2 + 8 S + 8 (S = 2^31 - 1)
    // exceeds 2^63: the bounds arithmetic must notice the overflow rather than wrap.
    l->p.mask_len = INT64_MAX;
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1, "overflows");
  }
  {
    auto l = three(F::QlenOnlyBitpacking, C::Csr, 2);
    l->p.mask_word_bytes = 3;
    expect_invalid([&] { validate_mask(l->p); }, "mask_word_bytes", -1);
    l->p.mask_word_bytes = 1;  // D_2 = 9 does not fit 8 bits
    expect_invalid([&] { validate_mask(l->p); }, "mask_word_bytes", -1, "request 2");
  }
  {
    auto l = three(F::QlenOnlyBitpacking, C::Csr, 2);
    l->p.mask_draft_stride = 8;
    expect_invalid([&] { validate_mask(l->p); }, "mask_draft_stride", 2);
    l->p.mask_draft_stride = 9;
    l->p.mask_len -= 1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1);
  }
  {
    std::vector<DraftTree> trees = {DraftTree::chain(3), DraftTree::chain(33)};
    auto l = make_launch(trees, {0, 4}, F::DraftBits);
    ASSERT_EQ(l->p.mask_draft_stride, 2);
    l->p.mask_draft_stride = 1;  // one word cannot hold 33 columns
    expect_invalid([&] { validate_mask(l->p); }, "mask_draft_stride", 1);
    l->p.mask_draft_stride = 2;
    l->p.mask_len -= 1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_len", -1);
    l->p.mask_len = 0;
    l->p.mask_draft_stride = -1;
    expect_invalid([&] { validate_mask(l->p); }, "mask_draft_stride", 0);
  }
}

TEST(Mask, ValidateRejectsNegativeExtents) {
  {  // CacheSlots with kv length < D_i gives P_i < 0
    std::vector<DraftTree> trees = {DraftTree::chain(4), DraftTree::chain(4)};
    auto l = make_launch(trees, {3, 0}, F::FullMask, C::Csr, 4, DraftKvSource::CacheSlots);
    l->kv_indptr[2] = l->kv_indptr[1] + 2;  // request 1: kv length 2 < D = 4
    expect_invalid([&] { validate_mask(l->p); }, "kv_indptr", 2);
  }
  {
    auto l = three(F::QlenOnly);
    l->qo_indptr[2] = l->qo_indptr[1] - 1;
    expect_invalid([&] { validate_mask(l->p); }, "qo_indptr", 2);
  }
}

TEST(Mask, DecodeTreesRejectsARequestWithoutDraftNodes) {
  // D_1 = 0 (qo_indptr[2] == qo_indptr[1]): nothing to read, so validate_mask passes and the block
  // is 0 x 0, but a draft tree needs its root; decode_trees names the request.
  std::vector<DraftTree> trees = {DraftTree::chain(3), DraftTree::chain(2)};
  auto l = make_launch(trees, {1, 1}, F::QlenOnly);
  l->qo_indptr[2] = l->qo_indptr[1];
  l->p.batch_size = 2;
  EXPECT_NO_THROW(validate_mask(l->p));
  EXPECT_EQ(draft_block(l->p, 1).rows(), 0);
  expect_invalid([&] { decode_trees(l->p); }, "mask", 1, "empty");
}

TEST(Mask, DecodersRejectOutOfRangeRequestsAndNodes) {
  auto l = three(F::DraftBits);
  expect_invalid([&] { (void)draft_block(l->p, 3); }, "request", 3);
  expect_invalid([&] { (void)draft_block(l->p, -1); }, "request", -1);
  expect_invalid([&] { (void)mask_visible(l->p, 0, 3, 0); }, "t", 3);
  expect_invalid([&] { (void)mask_visible(l->p, 1, 0, -1); }, "j", -1);
}

TEST(Mask, DecodeTreesNamesTheRequestWhoseBlockIsNotATree) {
  {  // a bit above the diagonal in request 1
    auto l = three(F::QlenOnly);
    l->mask.data[(1 * 9 + 0) * 9 + 2] = 1;  // request 1, row 0, column 2
    expect_invalid([&] { decode_trees(l->p); }, "mask", 1, "above the diagonal");
  }
  {  // parent-only row in request 1 (a chain row 3 missing its grandparent, docs/spec.md §7.6)
    auto l = three(F::FullMask);
    // request 1 starts at 3 * 5 = 15; P = 0, D = 5: row 3, column 1 is element 15 + 3 * 5 + 1.
    l->mask.data[15 + 3 * 5 + 1] = 0;
    expect_invalid([&] { decode_trees(l->p); }, "mask", 1);
  }
  {  // diagonal missing in request 2 of a DraftBits mask (row 4 of request 2 is token 8 + 4)
    auto l = three(F::DraftBits);
    l->mask.data[(8 + 4) * 4] &= static_cast<uint8_t>(~(1u << 4));
    expect_invalid([&] { decode_trees(l->p); }, "mask", 2, "diagonal");
  }
}

}  // namespace
}  // namespace mlaverify::model

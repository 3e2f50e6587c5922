// Tests of model/batch.h: VerifyBatch params are valid for every mask format, layout, dtype,
// draft source, page size and padding; slots, poisoning, padding rows and logical data as
// specified.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/batch.h"
#include "model/validate.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::catch_invalid;

DraftTree random_tree(int32_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int32_t> parent(static_cast<size_t>(n));  // [D]
  parent[0] = -1;
  for (int32_t t = 1; t < n; ++t)
    parent[static_cast<size_t>(t)] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(t)));
  return DraftTree::from_parents(parent);
}

// Edges on purpose: P = 0, 1, tile - 1 (63), tile + 1 (65); D = 1, non-powers of two; D <= 32 so
// QlenOnlyBitpacking applies.
BatchSpec small_spec(uint64_t seed) {
  BatchSpec s;
  s.requests.push_back({random_tree(5, seed + 1), 0});
  s.requests.push_back({DraftTree::chain(4), 1});
  s.requests.push_back({DraftTree::star(7), 65});
  s.requests.push_back({random_tree(13, seed + 2), 63});
  s.requests.push_back({DraftTree::chain(1), 2});
  s.num_heads = 3;
  s.seed = seed;
  return s;
}

struct Variant {
  KvLayout layout;
  int64_t row_stride;
  DType dtype;
  int32_t page_size;
  BatchSpec::SlotOrder order;

  // The spec with this storage variant applied (everything else kept).
  BatchSpec on(BatchSpec s) const {
    s.layout = layout;
    s.row_stride = row_stride;
    s.kv_dtype = dtype;
    s.page_size = page_size;
    s.slot_order = order;
    return s;
  }
};

std::string describe(const BatchSpec& s) {
  return "layout=" + std::to_string(static_cast<int>(s.layout.kind)) +
         " stride=" + std::to_string(s.row_stride) +
         " dtype=" + std::to_string(static_cast<int>(s.kv_dtype)) +
         " source=" + std::to_string(static_cast<int>(s.draft_source)) +
         " mask=" + std::to_string(static_cast<int>(s.mask_format)) +
         " conv=" + std::to_string(static_cast<int>(s.mask_indptr_convention)) +
         " page=" + std::to_string(s.page_size) + " padded=" + std::to_string(s.graph_padded_bs) +
         " order=" + std::to_string(static_cast<int>(s.slot_order));
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {KvLayout::latent_first(), 576, DType::BF16, 1, BatchSpec::SlotOrder::Scattered},
      {KvLayout::latent_first(), 640, DType::F32, 1, BatchSpec::SlotOrder::Contiguous},
      {KvLayout::rope_first(), 576, DType::BF16, 4, BatchSpec::SlotOrder::Scattered},
      {KvLayout::split(0, 512, 0, 64), 576, DType::F32, 16, BatchSpec::SlotOrder::Scattered},
      {KvLayout::split(0, 512, 0, 64), 576, DType::BF16, 1, BatchSpec::SlotOrder::Contiguous},
  };
  return v;
}

const MaskFormat kFormats[] = {MaskFormat::FullMask, MaskFormat::QlenOnly,
                               MaskFormat::QlenOnlyBitpacking, MaskFormat::FlashInferPacked,
                               MaskFormat::DraftBits};

// Every combination builds, passes validate_params, and its params describe the batch.
TEST(VerifyBatch, ParamsValidForEveryCombination) {
  int built = 0;
  for (const Variant& v : variants()) {
    for (MaskFormat f : kFormats) {
      for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
        for (IndptrConvention conv : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
          for (int32_t padded : {0, 8}) {
            BatchSpec s = v.on(small_spec(11));
            s.mask_format = f;
            s.draft_source = src;
            s.mask_indptr_convention = conv;
            s.graph_padded_bs = padded;
            VerifyBatch b = VerifyBatch::build(s);
            const VerifyParams p = b.params();
            ASSERT_NO_THROW(validate_params(p)) << describe(s);
            EXPECT_EQ(p.batch_size, padded ? 8 : 5) << describe(s);
            EXPECT_EQ(p.num_heads, 3);
            EXPECT_EQ(p.max_draft, 13);
            // T = 5 + 4 + 7 + 13 + 1 = 30, plus 3 padded rows of D = 13.
            EXPECT_EQ(p.max_total_q, padded ? 30 + 3 * 13 : 30) << describe(s);
            EXPECT_EQ(p.kv_layout.kind, v.layout.kind);
            EXPECT_EQ(p.kv_dtype, v.dtype);
            EXPECT_EQ(p.mask_format, f);
            EXPECT_EQ(p.draft_source, src);
            EXPECT_EQ(p.q_token_stride, 3 * 576);
            EXPECT_EQ(p.o_token_stride, 3 * 512);
            if (v.layout.kind != LayoutKind::Split) {
              EXPECT_EQ(p.kv_layout.latent_stride, v.row_stride);
            }
            // The mask decodes back to the real trees (padded rows hold garbage: not decoded).
            for (int32_t i = 0; i < 5; ++i) {
              EXPECT_EQ(DraftTree::from_ancestor_bits(draft_block(p, i)),
                        s.requests[static_cast<size_t>(i)].tree)
                  << describe(s) << " request " << i;
            }
            ++built;
          }
        }
      }
    }
  }
  EXPECT_EQ(built, 5 * 5 * 2 * 2 * 2);
}

// Slots: distinct, never slot 0 / page 0, in req_to_token, named by kv_indices in order.
TEST(VerifyBatch, SlotsAreOwnedOnceAndMatchMetadata) {
  for (const Variant& v : variants()) {
    for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      BatchSpec s = small_spec(3);
      s.page_size = v.page_size;
      s.slot_order = v.order;
      s.draft_source = src;
      VerifyBatch b = VerifyBatch::build(s);
      std::set<int64_t> seen;
      std::set<int32_t> rows;
      const VerifyMetadata& m = b.metadata();
      for (int32_t i = 0; i < b.real_batch_size(); ++i) {
        const std::vector<int64_t> pre = b.prefix_slots(i);
        const std::vector<int64_t> dr = b.draft_slots(i);
        ASSERT_EQ(static_cast<int64_t>(pre.size()), s.requests[static_cast<size_t>(i)].prefix_len);
        ASSERT_EQ(static_cast<int32_t>(dr.size()), s.requests[static_cast<size_t>(i)].tree.size());
        EXPECT_GE(b.req_pool_index(i), 1) << "row 0 is reserved for padding";
        EXPECT_TRUE(rows.insert(b.req_pool_index(i)).second);
        std::vector<int64_t> all = pre;
        all.insert(all.end(), dr.begin(), dr.end());
        for (int64_t slot : all) {
          EXPECT_GE(slot / v.page_size, 1) << "page 0 (the sink page) handed out: slot " << slot;
          EXPECT_LT(slot, b.pool().num_slots());
          EXPECT_TRUE(seen.insert(slot).second) << "slot " << slot << " owned twice";
        }
        // kv_indices name the prefix (and on CacheSlots the draft slots) in token order.
        const std::vector<int64_t>& want = src == DraftKvSource::CacheSlots ? all : pre;
        const int64_t begin = m.kv_indptr[static_cast<size_t>(i)];
        ASSERT_EQ(m.kv_indptr[static_cast<size_t>(i) + 1] - begin,
                  static_cast<int64_t>(want.size()));
        for (size_t j = 0; j < want.size(); ++j) {
          EXPECT_EQ(m.kv_indices[static_cast<size_t>(begin) + j], want[j]);
        }
        // Tokens j and j + 1 share a page unless j + 1 starts one: slot + 1 within a page.
        for (size_t j = 0; j + 1 < all.size(); ++j) {
          if ((j + 1) % static_cast<size_t>(v.page_size) != 0) {
            EXPECT_EQ(all[j + 1], all[j] + 1);
          }
        }
      }
    }
  }
}

TEST(VerifyBatch, ContiguousIsAscendingRunsScatteredIsNot) {
  BatchSpec s = small_spec(5);
  s.slot_order = BatchSpec::SlotOrder::Contiguous;
  VerifyBatch c = VerifyBatch::build(s);
  int64_t expect_next = 1;  // contiguous allocation hands out slots 1, 2, 3, ... in request order
  for (int32_t i = 0; i < c.real_batch_size(); ++i) {
    std::vector<int64_t> all = c.prefix_slots(i);
    const std::vector<int64_t> dr = c.draft_slots(i);
    all.insert(all.end(), dr.begin(), dr.end());
    for (int64_t slot : all) EXPECT_EQ(slot, expect_next++);
  }
  s.slot_order = BatchSpec::SlotOrder::Scattered;
  VerifyBatch sc = VerifyBatch::build(s);
  // 161 of 181 slots (20 spare) in a random permutation: the chance that every consecutive pair
  // of the prefixes (65 and 63 slots long) ascends by one is astronomically small.
  int breaks = 0;
  for (int32_t i = 0; i < sc.real_batch_size(); ++i) {
    std::vector<int64_t> all = sc.prefix_slots(i);
    for (size_t j = 0; j + 1 < all.size(); ++j) breaks += all[j + 1] != all[j] + 1;
  }
  EXPECT_GT(breaks, 0);
}

bool is_nan_row(const std::array<float, kRowDim>& r) {
  for (float x : r) {
    if (!std::isnan(x)) return false;
  }
  return true;
}
bool is_finite_row(const std::array<float, kRowDim>& r) {
  for (float x : r) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

TEST(VerifyBatch, UnusedSlotsPoisonedSlotZeroFinite) {
  for (const Variant& v : variants()) {
    for (bool poison : {true, false}) {
      BatchSpec s = v.on(small_spec(9));
      s.poison_unused_slots = poison;
      VerifyBatch b = VerifyBatch::build(s);
      std::set<int64_t> owned;
      for (int32_t i = 0; i < b.real_batch_size(); ++i) {
        for (int64_t x : b.prefix_slots(i)) owned.insert(x);
        for (int64_t x : b.draft_slots(i)) owned.insert(x);
      }
      // Slot 0 is read by padded rows, so it is finite garbage, never NaN (and not all zero:
      // a real sink holds whatever padded tokens wrote).
      const auto sink = b.pool().read_row(0);
      EXPECT_TRUE(is_finite_row(sink));
      int64_t nan_slots = 0;
      for (int64_t slot = 1; slot < b.pool().num_slots(); ++slot) {
        const auto row = b.pool().read_row(slot);
        if (owned.count(slot)) {
          EXPECT_TRUE(is_finite_row(row)) << "owned slot " << slot;
        } else if (poison) {
          EXPECT_TRUE(is_nan_row(row)) << "unused slot " << slot << " not poisoned";
          ++nan_slots;
        } else {
          EXPECT_TRUE(is_finite_row(row)) << "unused slot " << slot;
        }
      }
      // spare_pages auto = max(4, used / 8) >= 4 pages of unused slots exist to poison.
      if (poison) {
        EXPECT_GE(nan_slots, 4 * v.page_size);
      }
    }
  }
}

// The logical values of (request, token) do not depend on layout, dtype, page size, slot order or
// draft source; k_extend rows equal the draft slots' rows.
TEST(VerifyBatch, LogicalDataIndependentOfStorage) {
  BatchSpec base = small_spec(21);
  VerifyBatch ref = VerifyBatch::build(base);
  for (const Variant& v : variants()) {
    for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      BatchSpec s = v.on(base);
      s.draft_source = src;
      VerifyBatch b = VerifyBatch::build(s);
      for (int32_t i = 0; i < b.real_batch_size(); ++i) {
        std::vector<int64_t> a = ref.prefix_slots(i), c = b.prefix_slots(i);
        const auto ad = ref.draft_slots(i), cd = b.draft_slots(i);
        a.insert(a.end(), ad.begin(), ad.end());
        c.insert(c.end(), cd.begin(), cd.end());
        for (size_t j = 0; j < a.size(); ++j) {
          ASSERT_EQ(ref.pool().read_row(a[j]), b.pool().read_row(c[j]))
              << describe(s) << " request " << i << " token " << j;
        }
      }
      ASSERT_EQ(b.q().size(), ref.q().size());
      EXPECT_EQ(0, std::memcmp(b.q().data(), ref.q().data(), b.q().size() * sizeof(bf16)));
    }
  }
}

float k_extend_value(const VerifyBatch& b, int64_t t, int k) {
  const std::vector<std::byte>& raw = b.k_extend();
  if (b.spec().kv_dtype == DType::BF16) {
    bf16 v;
    std::memcpy(&v, raw.data() + (static_cast<size_t>(t) * kRowDim + k) * 2, 2);
    return bf16_to_float(v);
  }
  float f;
  std::memcpy(&f, raw.data() + (static_cast<size_t>(t) * kRowDim + k) * 4, 4);
  return f;
}

TEST(VerifyBatch, ExtendRowsEqualDraftSlots) {
  for (DType dt : {DType::BF16, DType::F32}) {
    BatchSpec s = small_spec(4);
    s.kv_dtype = dt;
    s.layout = KvLayout::rope_first();
    VerifyBatch b = VerifyBatch::build(s);
    for (int32_t i = 0; i < b.real_batch_size(); ++i) {
      const std::vector<int64_t> dr = b.draft_slots(i);
      for (size_t t = 0; t < dr.size(); ++t) {
        const auto row = b.pool().read_row(dr[t]);
        const int64_t token =
            b.metadata().qo_indptr[static_cast<size_t>(i)] + static_cast<int64_t>(t);
        for (int k = 0; k < kRowDim; ++k) {
          ASSERT_EQ(k_extend_value(b, token, k), row[static_cast<size_t>(k)])
              << i << " " << t << " " << k;
        }
      }
    }
  }
}

// q and kv values are N(0, scale^2) rounded to bf16. Bounds (6 sigma, so a correct generator
// fails with probability < 1e-8): the table is itself a sample of 65536 normals, so its mean is
// off by sd 1/sqrt(65536) and its variance by sd sqrt(2/65536); drawing n values from it adds
// 1/sqrt(n) and sqrt(2/n). bf16 rounding (8 significant bits, round to nearest: unit roundoff
// u = 2^-8) scales each value by (1 + d), |d| <= 2^-8, moving the standard deviation by at most
// 2^-8 relative. A wrong scale (e.g. scale^2, or none) lands far outside.
TEST(VerifyBatch, ValuesHaveTheRequestedScale) {
  for (double scale : {1.0, 0.1}) {
    BatchSpec s = small_spec(8);
    s.value_scale = scale;
    s.num_heads = 16;
    VerifyBatch b = VerifyBatch::build(s);
    double sum = 0, sum2 = 0;
    for (bf16 x : b.q()) {
      const double v = bf16_to_float(x);
      sum += v;
      sum2 += v * v;
    }
    const double n = static_cast<double>(b.q().size());
    const double mean = sum / n;
    const double sd = std::sqrt(sum2 / n - mean * mean);
    const double mean_tol = 6.0 * std::sqrt(1.0 / 65536 + 1.0 / n) * scale;
    // Relative sd error: half the relative variance error, plus the bf16 term.
    const double sd_tol = 6.0 * 0.5 * std::sqrt(2.0 / 65536 + 2.0 / n) + std::ldexp(1.0, -8);
    EXPECT_LT(std::abs(mean), mean_tol) << "scale " << scale;
    EXPECT_LT(std::abs(sd / scale - 1.0), sd_tol) << "scale " << scale << " sd " << sd;
    // Every value is a bf16 and finite.
    for (bf16 x : b.q()) ASSERT_TRUE(std::isfinite(bf16_to_float(x)));
  }
}

TEST(VerifyBatch, SeedChangesData) {
  BatchSpec s = small_spec(1);
  VerifyBatch a = VerifyBatch::build(s);
  s.seed = 2;
  VerifyBatch c = VerifyBatch::build(s);
  EXPECT_NE(0, std::memcmp(a.q().data(), c.q().data(), a.q().size() * sizeof(bf16)));
  // Same seed: identical (determinism).
  s.seed = 1;
  VerifyBatch a2 = VerifyBatch::build(s);
  EXPECT_EQ(0, std::memcmp(a.q().data(), a2.q().data(), a.q().size() * sizeof(bf16)));
  EXPECT_EQ(a.metadata().kv_indices, a2.metadata().kv_indices);
}

// docs/spec.md §3 padding through the builder: real rows are exactly the unpadded batch's rows;
// padded rows have P = 1, request row 0, slot 0, D = the batch's D, and garbage mask bytes and
// positions.
TEST(VerifyBatch, GraphPaddingRowsExactlyAsSpec) {
  for (MaskFormat f : kFormats) {
    for (DraftKvSource src : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      BatchSpec s = small_spec(31);
      s.mask_format = f;
      s.draft_source = src;
      VerifyBatch plain = VerifyBatch::build(s);
      s.graph_padded_bs = 8;
      VerifyBatch pad = VerifyBatch::build(s);
      const int64_t real_t = plain.total_tokens();
      EXPECT_EQ(pad.real_batch_size(), 5);
      EXPECT_EQ(pad.batch_size(), 8);
      EXPECT_EQ(pad.real_tokens(), real_t);
      EXPECT_EQ(pad.total_tokens(), real_t + 3 * 13);
      for (int32_t i = 5; i < 8; ++i) {
        EXPECT_EQ(pad.prefix_len(i), 1);
        EXPECT_EQ(pad.req_pool_index(i), 0);
        EXPECT_EQ(pad.tree(i).size(), 13);  // the batch's D = max D
        EXPECT_EQ(pad.prefix_slots(i), std::vector<int64_t>{0});
        EXPECT_EQ(pad.draft_slots(i), std::vector<int64_t>(13, 0));
      }
      const VerifyMetadata& mp = pad.metadata();
      const VerifyMetadata& mr = plain.metadata();
      // Real rows' metadata is a prefix of the padded one.
      for (size_t k = 0; k <= 5; ++k) {
        EXPECT_EQ(mp.qo_indptr[k], mr.qo_indptr[k]);
        EXPECT_EQ(mp.kv_indptr[k], mr.kv_indptr[k]);
      }
      const int64_t per_pad_kv = src == DraftKvSource::CacheSlots ? 1 + 13 : 1;
      ASSERT_EQ(static_cast<int64_t>(mp.kv_indices.size()),
                static_cast<int64_t>(mr.kv_indices.size()) + 3 * per_pad_kv);
      for (size_t k = 0; k < mp.kv_indices.size(); ++k) {
        if (k < mr.kv_indices.size()) {
          EXPECT_EQ(mp.kv_indices[k], mr.kv_indices[k]);
        } else {
          EXPECT_EQ(mp.kv_indices[k], 0) << "padded rows read slot 0 only";
        }
      }
      // Positions: real ones equal P + depth; padded ones stale garbage (not 1 + depth).
      int64_t garbage_positions = 0;
      for (int64_t t = 0; t < pad.total_tokens(); ++t) {
        if (t < real_t) {
          EXPECT_EQ(mp.positions[static_cast<size_t>(t)], mr.positions[static_cast<size_t>(t)]);
        } else {
          const int64_t node = (t - real_t) % 13;
          garbage_positions += mp.positions[static_cast<size_t>(t)] != 1 + node;  // chain depth
        }
      }
      EXPECT_EQ(garbage_positions, 3 * 13);
      // Mask: the real rows' bytes are the unpadded batch's bytes.
      const ByteRange r = padded_mask_bytes(pad.mask(), 5, real_t);
      ASSERT_EQ(r.begin, static_cast<int64_t>(plain.mask().data.size()));
      EXPECT_EQ(0, std::memcmp(pad.mask().data.data(), plain.mask().data.data(),
                               static_cast<size_t>(r.begin)));
      // Queries of real tokens are unchanged by padding.
      EXPECT_EQ(0, std::memcmp(pad.q().data(), plain.q().data(), plain.q().size() * sizeof(bf16)));
      EXPECT_NO_THROW(validate_params(pad.params()));
    }
  }
}

TEST(VerifyBatch, IndptrsCarryTheirConvention) {
  for (IndptrConvention conv : {IndptrConvention::Csr, IndptrConvention::OffsetsOnly}) {
    for (MaskFormat f : {MaskFormat::FullMask, MaskFormat::FlashInferPacked}) {
      BatchSpec s = small_spec(6);
      s.mask_format = f;
      s.mask_indptr_convention = conv;
      s.graph_padded_bs = 7;
      VerifyBatch b = VerifyBatch::build(s);
      EXPECT_NO_THROW(b.qo_indptr().check("qo_indptr", 7, b.total_tokens()));
      EXPECT_NO_THROW(b.kv_indptr().check("kv_indptr", 7));
      const Indptr<int64_t> m = b.mask_indptr();
      EXPECT_EQ(m.convention(), conv);
      EXPECT_EQ(m.length(), conv == IndptrConvention::Csr ? 8 : 7);
      EXPECT_NO_THROW(m.check("mask_indptr", 7, b.mask().len));
      // FullMask: request 1 (D = 4, P = 1) starts after request 0's 5 * (0 + 5) = 25 elements.
      if (f == MaskFormat::FullMask) {
        EXPECT_EQ(m.start(1), 25);
      }
      // The other convention's length is the classic slice bug, and check() says so.
      const Indptr<int64_t> wrong(m.values(), conv == IndptrConvention::Csr
                                                  ? IndptrConvention::OffsetsOnly
                                                  : IndptrConvention::Csr);
      EXPECT_THROW(wrong.check("mask_indptr", 7), InvalidInput);
    }
  }
  BatchSpec s = small_spec(6);
  s.mask_format = MaskFormat::DraftBits;
  EXPECT_EQ(VerifyBatch::build(s).mask_indptr().length(), 0);
}

TEST(VerifyBatch, PoisonOutputs) {
  VerifyBatch b = VerifyBatch::build(small_spec(2));
  ASSERT_EQ(static_cast<int64_t>(b.o_lat().size()), b.total_tokens() * 3 * 512);
  ASSERT_EQ(static_cast<int64_t>(b.lse().size()), b.total_tokens() * 3);
  for (bf16 x : b.o_lat()) ASSERT_TRUE(std::isnan(bf16_to_float(x)));
  for (float x : b.lse()) ASSERT_TRUE(std::isnan(x));
  std::fill(b.o_lat().begin(), b.o_lat().end(), float_to_bf16(1.f));
  std::fill(b.lse().begin(), b.lse().end(), 0.f);
  EXPECT_EQ(b.o_lat_value(2, 1, 7), 1.f);
  b.poison_outputs();
  EXPECT_TRUE(std::isnan(b.o_lat_value(2, 1, 7)));
  EXPECT_TRUE(std::isnan(b.lse_value(b.total_tokens() - 1, 2)));
}

RefResult reference_of(const BatchSpec& s) {
  VerifyBatch b = VerifyBatch::build(s);
  return reference_verify(b.params());
}

// Bit-identical, not within a tolerance: the model reads the same stored values in the same key
// order (prefix, then draft nodes) on both paths, so every double operation is the same.
void expect_same_real_rows(const RefResult& a, const RefResult& b, int64_t real_tokens,
                           const std::string& what) {
  ASSERT_EQ(a.heads, b.heads);
  for (int64_t t = 0; t < real_tokens; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) {
      ASSERT_EQ(a.lse_at(t, h), b.lse_at(t, h)) << what << " t=" << t << " h=" << h;
      for (int k = 0; k < kLatentDim; ++k) {
        ASSERT_EQ(a.o(t, h, k), b.o(t, h, k)) << what << " t=" << t << " h=" << h << " k=" << k;
      }
    }
  }
}

TEST(VerifyBatch, CacheSlotsAndExtendRowsGiveIdenticalReference) {
  for (int32_t padded : {0, 8}) {
    BatchSpec s = small_spec(17);
    s.graph_padded_bs = padded;
    s.draft_source = DraftKvSource::ExtendRows;
    const RefResult ext = reference_of(s);
    s.draft_source = DraftKvSource::CacheSlots;
    const RefResult cache = reference_of(s);
    // Padded rows differ on purpose (garbage k_extend rows vs the sink slot): real rows only.
    expect_same_real_rows(ext, cache, 30, "padded=" + std::to_string(padded));
    for (double x : ext.o_lat) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(VerifyBatch, StorageChoicesGiveIdenticalReference) {
  const BatchSpec base = small_spec(23);
  const RefResult ref = reference_of(base);
  for (const Variant& v : variants()) {
    for (MaskFormat f : kFormats) {
      BatchSpec s = v.on(base);
      s.mask_format = f;
      expect_same_real_rows(ref, reference_of(s), 30, describe(s));
    }
  }
}

TEST(VerifyBatch, SpecRejections) {
  struct Bad {
    const char* field;
    int64_t index;
    void (*mutate)(BatchSpec&);
  };
  const Bad bads[] = {
      {"requests", -1, [](BatchSpec& s) { s.requests.clear(); }},
      {"requests.prefix_len", 2, [](BatchSpec& s) { s.requests[2].prefix_len = -1; }},
      {"requests.tree", 1, [](BatchSpec& s) { s.requests[1].tree = DraftTree::chain(1025); }},
      {"num_heads", -1, [](BatchSpec& s) { s.num_heads = 0; }},
      {"num_heads", -1, [](BatchSpec& s) { s.num_heads = 129; }},
      {"sm_scale", -1, [](BatchSpec& s) { s.sm_scale = -1.0; }},
      {"sm_scale", -1, [](BatchSpec& s) { s.sm_scale = NAN; }},
      {"kv_dtype", -1, [](BatchSpec& s) { s.kv_dtype = static_cast<DType>(3); }},
      {"layout.kind", -1, [](BatchSpec& s) { s.layout.kind = static_cast<LayoutKind>(3); }},
      {"row_stride", -1, [](BatchSpec& s) { s.row_stride = 575; }},
      {"page_size", -1, [](BatchSpec& s) { s.page_size = 0; }},
      {"slot_order", -1, [](BatchSpec& s) { s.slot_order = static_cast<BatchSpec::SlotOrder>(2); }},
      {"graph_padded_bs", -1, [](BatchSpec& s) { s.graph_padded_bs = 4; }},
      {"value_scale", -1, [](BatchSpec& s) { s.value_scale = 0.0; }},
      {"value_scale", -1, [](BatchSpec& s) { s.value_scale = INFINITY; }},
      {"num_splits", -1, [](BatchSpec& s) { s.num_splits = 0; }},
      {"num_splits", -1, [](BatchSpec& s) { s.num_splits = 65; }},
      {"spare_pages", -1, [](BatchSpec& s) { s.spare_pages = -2; }},
  };
  for (const Bad& bad : bads) {
    BatchSpec s = small_spec(1);
    bad.mutate(s);
    auto e = catch_invalid([&] { VerifyBatch::build(s); });
    EXPECT_EQ(e.field(), bad.field) << e.what();
    EXPECT_EQ(e.index(), bad.index) << e.what();
  }
  // Mask-format limits come from encode_mask: bitpacking needs D <= 32.
  BatchSpec s = small_spec(1);
  s.requests.push_back({DraftTree::chain(33), 0});
  s.mask_format = MaskFormat::QlenOnlyBitpacking;
  EXPECT_THROW(VerifyBatch::build(s), InvalidInput);
}

TEST(VerifyBatch, AccessorRejections) {
  VerifyBatch b = VerifyBatch::build(small_spec(1));
  auto e = catch_invalid([&] { b.tree(5); });
  EXPECT_EQ(e.field(), "request");
  EXPECT_EQ(e.index(), 5);
  e = catch_invalid([&] { b.draft_slots(-1); });
  EXPECT_EQ(e.index(), -1);
  e = catch_invalid([&] { b.o_lat_value(b.total_tokens(), 0, 0); });
  EXPECT_EQ(e.field(), "t");
  e = catch_invalid([&] { b.o_lat_value(0, 3, 0); });
  EXPECT_EQ(e.field(), "h");
  e = catch_invalid([&] { b.o_lat_value(0, 0, 512); });
  EXPECT_EQ(e.field(), "k");
  e = catch_invalid([&] { b.lse_value(-1, 0); });
  EXPECT_EQ(e.field(), "t");
}

// A bs = 64 batch with P = 1024 and D = 16 (66K KV rows): built once here so CI catches a
// generator that becomes pathologically slow; the timing itself is reported by hand, not asserted.
TEST(VerifyBatch, LargeBatchBuilds) {
  BatchSpec s;
  for (int i = 0; i < 64; ++i) s.requests.push_back({random_tree(16, 100 + i), 1024});
  s.num_heads = 8;
  VerifyBatch b = VerifyBatch::build(s);
  EXPECT_EQ(b.total_tokens(), 64 * 16);
  EXPECT_EQ(b.metadata().kv_indices.size(), 64u * 1024);
}

}  // namespace
}  // namespace mlaverify::model

// Tests of model/validate.h: a well-formed VerifyBatch passes, and every rejection of
// validate_params names the field and the index at fault (one case per field and condition).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/validate.h"

namespace mlaverify::model {
namespace {

// Two requests worked by hand so every expected index below can be read off:
//   request 0: chain of 2 nodes, P = 3;  request 1: star of 3 nodes, P = 2.
//   qo_indptr = [0, 2, 5] (T = 5); ExtendRows kv_indptr = [0, 3, 5]; CacheSlots [0, 5, 10].
//   Pool: 10 used slots + 4 spare (spare_pages = 4) + the sink page = 15 slots.
BatchSpec two_requests(DraftKvSource source) {
  BatchSpec s;
  s.requests.push_back({DraftTree::chain(2), 3});
  s.requests.push_back({DraftTree::star(3), 2});
  s.num_heads = 4;
  s.draft_source = source;
  s.spare_pages = 4;
  s.seed = 7;
  return s;
}

struct Case {
  std::string name;
  DraftKvSource source;
  std::function<void(VerifyBatch&, VerifyParams&)> mutate;
  std::string field;
  int64_t index;
  std::string detail_part;  // a substring the detail must contain ("" = any)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class ValidateRejects : public ::testing::TestWithParam<Case> {};

TEST_P(ValidateRejects, NamesFieldAndIndex) {
  const Case& c = GetParam();
  VerifyBatch b = VerifyBatch::build(two_requests(c.source));
  VerifyParams p = b.params();
  ASSERT_NO_THROW(validate_params(p)) << "the unmutated batch must be valid";
  c.mutate(b, p);
  try {
    validate_params(p);
    FAIL() << c.name << ": expected InvalidInput(" << c.field << ", " << c.index << ")";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), c.field) << e.what();
    EXPECT_EQ(e.index(), c.index) << e.what();
    if (!c.detail_part.empty()) {
      EXPECT_NE(e.detail().find(c.detail_part), std::string::npos) << e.what();
    }
  }
}

constexpr auto kExt = DraftKvSource::ExtendRows;
constexpr auto kCache = DraftKvSource::CacheSlots;
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

// Each metadata mutation edits the batch's own buffer and re-takes params(), so the pointer the
// validator reads is the mutated buffer.
using M = std::function<void(VerifyBatch&, VerifyParams&)>;
M remeta(std::function<void(VerifyMetadata&)> f) {
  return [f](VerifyBatch& b, VerifyParams& p) {
    f(b.metadata());
    p = b.params();
  };
}

const std::vector<Case>& cases() {
  // One row per rejection, kept one line each so the table reads as a list.
  // clang-format off
  static const std::vector<Case> all = {
      // ---- static sizes ----
      {"batch_size_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.batch_size = 0; }, "batch_size", -1, ""},
      {"num_heads_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.num_heads = 0; }, "num_heads", -1, ""},
      {"num_heads_129", kExt, [](VerifyBatch&, VerifyParams& p) { p.num_heads = 129; }, "num_heads", -1, ""},
      {"max_draft_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.max_draft = 0; }, "max_draft", -1, ""},
      {"max_draft_1025", kExt, [](VerifyBatch&, VerifyParams& p) { p.max_draft = 1025; }, "max_draft", -1, ""},
      {"num_splits_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.num_splits = 0; }, "num_splits", -1, ""},
      {"num_splits_65", kExt, [](VerifyBatch&, VerifyParams& p) { p.num_splits = 65; }, "num_splits", -1, ""},
      {"max_total_q_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.max_total_q = 0; }, "max_total_q", -1, ""},
      {"sm_scale_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.sm_scale = 0.f; }, "sm_scale", -1, ""},
      {"sm_scale_negative", kExt, [](VerifyBatch&, VerifyParams& p) { p.sm_scale = -0.1f; }, "sm_scale", -1, ""},
      {"sm_scale_nan", kExt, [](VerifyBatch&, VerifyParams& p) { p.sm_scale = std::nanf(""); }, "sm_scale", -1, ""},
      {"sm_scale_inf", kExt, [](VerifyBatch&, VerifyParams& p) { p.sm_scale = INFINITY; }, "sm_scale", -1, ""},
      // ---- enums ----
      {"q_dtype_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_dtype = static_cast<DType>(7); }, "q_dtype", -1, ""},
      {"kv_dtype_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_dtype = static_cast<DType>(-1); }, "kv_dtype", -1, ""},
      {"o_dtype_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_dtype = static_cast<DType>(2); }, "o_dtype", -1, ""},
      {"layout_kind_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.kind = static_cast<LayoutKind>(9); }, "kv_layout.kind", -1, ""},
      {"draft_source_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.draft_source = static_cast<DraftKvSource>(5); }, "draft_source", -1, ""},
      {"mask_format_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.mask_format = static_cast<MaskFormat>(9); }, "mask_format", -1, ""},
      {"mask_convention_unknown", kExt, [](VerifyBatch&, VerifyParams& p) { p.mask_indptr_convention = static_cast<IndptrConvention>(3); }, "mask_indptr_convention", -1, ""},
      // ---- queries ----
      {"q_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.q = nullptr; }, "q", -1, "null"},
      {"q_head_stride_575", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_head_stride = 575; }, "q_head_stride", -1, ""},
      {"q_head_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_head_stride = kMax64 / 2; }, "q_head_stride", -1, "overflows"},
      {"q_token_stride_short", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_token_stride = 3 * 576; }, "q_token_stride", -1, ""},
      {"q_token_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_token_stride = kMax64 / 2; }, "q_token_stride", -1, "overflows"},
      // 65 + 512 = 577 > 576: q_lat would run into the next head.
      {"q_latent_offset_65", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_latent_offset = 65; }, "q_latent_offset", -1, ""},
      {"q_rope_offset_negative", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_rope_offset = -1; }, "q_rope_offset", -1, ""},
      {"q_rope_offset_513", kExt, [](VerifyBatch&, VerifyParams& p) { p.q_rope_offset = 513; }, "q_rope_offset", -1, ""},
      // ---- pool ----
      {"kv_pool_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_pool = nullptr; }, "kv_pool", -1, "null"},
      {"pool_slots_zero", kExt, [](VerifyBatch&, VerifyParams& p) { p.pool_slots = 0; }, "pool_slots", -1, ""},
      {"latent_offset_negative", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.latent_offset = -1; }, "kv_layout.latent_offset", -1, ""},
      {"latent_stride_511", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.latent_stride = 511; }, "kv_layout.latent_stride", -1, "overlap"},
      {"latent_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.latent_stride = kMax64 / 8; }, "kv_layout.latent_stride", -1, "overflows"},
      {"rope_offset_negative", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.rope_offset = -5; }, "kv_layout.rope_offset", -1, ""},
      {"rope_stride_63", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_layout.rope_stride = 63; }, "kv_layout.rope_stride", -1, ""},
      // ---- outputs ----
      {"o_lat_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_lat = nullptr; }, "o_lat", -1, "null"},
      {"o_head_stride_511", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_head_stride = 511; }, "o_head_stride", -1, ""},
      {"o_head_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_head_stride = kMax64 / 3; }, "o_head_stride", -1, "overflows"},
      {"o_token_stride_short", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_token_stride = 4 * 512 - 1; }, "o_token_stride", -1, ""},
      {"o_token_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.o_token_stride = kMax64 / 4; }, "o_token_stride", -1, "overflows"},
      {"lse_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.lse = nullptr; }, "lse", -1, "null"},
      // ---- draft KV rows ----
      {"k_extend_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.k_extend = nullptr; }, "k_extend", -1, "null"},
      {"k_extend_stride_575", kExt, [](VerifyBatch&, VerifyParams& p) { p.k_extend_stride = 575; }, "k_extend_stride", -1, ""},
      {"k_extend_stride_overflow", kExt, [](VerifyBatch&, VerifyParams& p) { p.k_extend_stride = kMax64 / 2; }, "k_extend_stride", -1, "overflows"},
      // ---- qo_indptr ----
      {"qo_indptr_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.qo_indptr = nullptr; }, "qo_indptr", -1, "null"},
      {"qo_indptr_start_1", kExt, remeta([](VerifyMetadata& m) { m.qo_indptr[0] = 1; }), "qo_indptr", 0, "start at 0"},
      // [0, 2, 1]: entry 2 is below entry 1.
      {"qo_indptr_decreasing", kExt, remeta([](VerifyMetadata& m) { m.qo_indptr[2] = 1; }), "qo_indptr", 2, "1 < 2"},
      // [0, 0, 5]: request 0 has D = 0; the entry ending it is index 1.
      {"qo_indptr_empty_request", kExt, remeta([](VerifyMetadata& m) { m.qo_indptr[1] = 0; }), "qo_indptr", 1, "D = 0"},
      // max_draft 2 < D_1 = 3: request 1, ended by entry 2.
      {"qo_indptr_d_over_max", kExt, [](VerifyBatch&, VerifyParams& p) { p.max_draft = 2; }, "qo_indptr", 2, "D = 3"},
      {"max_total_q_below_T", kExt, [](VerifyBatch&, VerifyParams& p) { p.max_total_q = 4; }, "max_total_q", -1, "T = qo_indptr[bs] = 5"},
      // ---- kv_indptr / kv_indices ----
      {"kv_indptr_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_indptr = nullptr; }, "kv_indptr", -1, "null"},
      {"kv_indptr_start_2", kExt, remeta([](VerifyMetadata& m) { m.kv_indptr[0] = 2; }), "kv_indptr", 0, ""},
      // [0, 3, 2]: entry 2 below entry 1.
      {"kv_indptr_decreasing", kExt, remeta([](VerifyMetadata& m) { m.kv_indptr[2] = 2; }), "kv_indptr", 2, "2 < 3"},
      {"kv_indices_len_short", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_indices_len = 4; }, "kv_indices_len", -1, "kv_indptr[bs] = 5"},
      // CacheSlots [0, 5, 10] -> [0, 8, 10]: request 1 has kv length 2 < D = 3 (entry 2).
      {"cache_slots_kv_shorter_than_draft", kCache, remeta([](VerifyMetadata& m) { m.kv_indptr[1] = 8; }), "kv_indptr", 2, "< D = 3"},
      {"kv_indices_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.kv_indices = nullptr; }, "kv_indices", -1, "null"},
      // The pool has 15 slots (see two_requests); slot 15 is one past the end.
      {"kv_indices_past_pool", kExt, remeta([](VerifyMetadata& m) { m.kv_indices[3] = 15; }), "kv_indices", 3, "slot 15 outside pool of 15"},
      {"kv_indices_negative", kCache, remeta([](VerifyMetadata& m) { m.kv_indices[9] = -1; }), "kv_indices", 9, "slot -1"},
      // ---- the mask, checked last through validate_mask ----
      {"mask_null", kExt, [](VerifyBatch&, VerifyParams& p) { p.mask = nullptr; }, "mask", -1, ""},
  };
  // clang-format on
  return all;
}

INSTANTIATE_TEST_SUITE_P(EachField, ValidateRejects, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(Validate, TwoRequestPoolHasFifteenSlots) {
  // Pins the arithmetic the kv_indices cases rely on: 3+2 + 2+3 = 10 used, 4 spare, 1 sink.
  VerifyBatch b = VerifyBatch::build(two_requests(kExt));
  EXPECT_EQ(b.params().pool_slots, 15);
  EXPECT_EQ(b.metadata().qo_indptr, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(b.metadata().kv_indptr, (std::vector<int32_t>{0, 3, 5}));
}

TEST(Validate, KvIndicesBeyondKvIndptrAreNotRead) {
  // Entries past kv_indptr[bs] are capacity, not data: garbage there is fine.
  VerifyBatch b = VerifyBatch::build(two_requests(kExt));
  b.metadata().kv_indices.push_back(999999);
  VerifyParams p = b.params();
  EXPECT_EQ(p.kv_indices_len, 6);
  EXPECT_NO_THROW(validate_params(p));
}

TEST(Validate, EmptyPrefixNeedsNoKvIndices) {
  // All P = 0 on the ExtendRows path: nothing to read, so a null kv_indices is acceptable.
  BatchSpec s;
  s.requests.push_back({DraftTree::chain(3), 0});
  VerifyBatch b = VerifyBatch::build(s);
  VerifyParams p = b.params();
  p.kv_indices = nullptr;
  p.kv_indices_len = 0;
  EXPECT_NO_THROW(validate_params(p));
}

TEST(Validate, CacheSlotsIgnoresKExtend) {
  VerifyBatch b = VerifyBatch::build(two_requests(kCache));
  VerifyParams p = b.params();
  EXPECT_EQ(p.k_extend, nullptr);
  p.k_extend_stride = 0;
  EXPECT_NO_THROW(validate_params(p));
}

}  // namespace
}  // namespace mlaverify::model

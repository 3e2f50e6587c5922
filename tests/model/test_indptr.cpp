// Tests of model/indptr.h: the CSR and offsets-only conventions, conversions between them, and
// the boundary check that catches a [:bs+1] slice handed where [:bs] was expected (and back).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/indptr.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::model {
namespace {

using mlaverify::testing::catch_invalid;

using C = IndptrConvention;

TEST(Indptr, CsrFromSizesIsPrefixSum) {
  // sizes 3, 0, 5 -> [0, 3, 3, 8]: worked by hand.
  const std::vector<int64_t> sizes = {3, 0, 5};
  auto ip = Indptr<int32_t>::csr_from_sizes(sizes);
  EXPECT_EQ(ip.convention(), C::Csr);
  EXPECT_EQ(ip.values(), (std::vector<int32_t>{0, 3, 3, 8}));
  EXPECT_EQ(ip.batch(), 3);
  EXPECT_EQ(ip.start(2), 3);
  EXPECT_EQ(ip.size(0), 3);
  EXPECT_EQ(ip.size(1), 0);
  EXPECT_EQ(ip.size(2), 5);
  EXPECT_NO_THROW(ip.check("qo_indptr", 3, 8));
}

TEST(Indptr, CsrFromSizesRejectsNegativeAndOverflow) {
  const std::vector<int64_t> neg = {2, -1};
  auto e = catch_invalid([&] { Indptr<int32_t>::csr_from_sizes(neg); });
  EXPECT_EQ(e.field(), "sizes");
  EXPECT_EQ(e.index(), 1);
  // 2^30 + 2^30 = 2^31 > INT32_MAX: the second sum overflows an int32 indptr.
  const std::vector<int64_t> big = {int64_t{1} << 30, int64_t{1} << 30};
  e = catch_invalid([&] { Indptr<int32_t>::csr_from_sizes(big); });
  EXPECT_EQ(e.index(), 1);
  // The same sizes fit an int64 indptr.
  EXPECT_EQ(Indptr<int64_t>::csr_from_sizes(big).values().back(), int64_t{1} << 31);
}

TEST(Indptr, ConversionRoundTrip) {
  const std::vector<int64_t> sizes = {4, 1, 7, 2};
  auto csr = Indptr<int64_t>::csr_from_sizes(sizes);
  auto off = csr.to(C::OffsetsOnly);
  EXPECT_EQ(off.convention(), C::OffsetsOnly);
  EXPECT_EQ(off.values(), (std::vector<int64_t>{0, 4, 5, 12}));
  EXPECT_EQ(off.batch(), 4);
  // start(i) is entry i under both conventions.
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(off.start(i), csr.start(i));
  EXPECT_NO_THROW(off.check("mask_indptr", 4, 14));
  auto back = off.to(C::Csr, 14);
  EXPECT_EQ(back.values(), csr.values());
  EXPECT_EQ(csr.to(C::Csr).values(), csr.values());
}

TEST(Indptr, OffsetsOnlyToCsrNeedsTotal) {
  Indptr<int64_t> off({0, 4}, C::OffsetsOnly);
  auto e = catch_invalid([&] { off.to(C::Csr); });
  EXPECT_EQ(e.field(), "indptr");
  e = catch_invalid([&] { off.to(C::Csr, 3); });  // ends before the last start
  EXPECT_EQ(e.index(), 1);
}

TEST(Indptr, SizeIsCsrOnly) {
  Indptr<int64_t> off({0, 4}, C::OffsetsOnly);
  auto e = catch_invalid([&] { off.size(0); });
  EXPECT_EQ(e.field(), "indptr");
  EXPECT_EQ(e.index(), 0);
  Indptr<int32_t> csr({0, 2}, C::Csr);
  e = catch_invalid([&] { csr.size(1); });  // only request 0 exists
  EXPECT_EQ(e.index(), 1);
  e = catch_invalid([&] { csr.start(-1); });
  EXPECT_EQ(e.index(), -1);
}

// The bug behind the project: a kernel that wants offsets [bs] is handed a [:bs+1] CSR slice.
TEST(Indptr, OffsetsOnlyHandedCsrSliceIsRejected) {
  Indptr<int64_t> slice({0, 6, 12}, C::OffsetsOnly);  // bs = 2 but three entries
  auto e = catch_invalid([&] { slice.check("mask_indptr", 2); });
  EXPECT_EQ(e.field(), "mask_indptr");
  EXPECT_EQ(e.index(), -1);
  EXPECT_NE(e.detail().find("[:bs+1] slice?"), std::string::npos) << e.what();
  EXPECT_NE(e.detail().find("got 3"), std::string::npos) << e.what();
}

// And the reverse: a CSR consumer handed the [:bs] offsets.
TEST(Indptr, CsrHandedOffsetsSliceIsRejected) {
  Indptr<int32_t> slice({0, 6}, C::Csr);  // bs = 2 but two entries
  auto e = catch_invalid([&] { slice.check("kv_indptr", 2); });
  EXPECT_EQ(e.field(), "kv_indptr");
  EXPECT_EQ(e.index(), -1);
  EXPECT_NE(e.detail().find("expected [bs+1]=3 entries (CSR), got 2; a [:bs] slice?"),
            std::string::npos)
      << e.what();
}

TEST(Indptr, CsrMustStartAtZero) {
  Indptr<int32_t> ip({1, 3, 4}, C::Csr);
  auto e = catch_invalid([&] { ip.check("qo_indptr", 2); });
  EXPECT_EQ(e.field(), "qo_indptr");
  EXPECT_EQ(e.index(), 0);
  // Offsets-only may start anywhere >= 0 (a request may begin mid-buffer) but not below 0.
  Indptr<int64_t> off({5, 9}, C::OffsetsOnly);
  EXPECT_NO_THROW(off.check("mask_indptr", 2));
  Indptr<int64_t> neg({-1, 9}, C::OffsetsOnly);
  e = catch_invalid([&] { neg.check("mask_indptr", 2); });
  EXPECT_EQ(e.index(), 0);
}

TEST(Indptr, NonMonotoneNamesTheIndex) {
  for (C c : {C::Csr, C::OffsetsOnly}) {
    // Entry 3 (5) is below entry 2 (7).
    std::vector<int32_t> v = {0, 4, 7, 5, 9};
    if (c == C::OffsetsOnly) v.pop_back();
    Indptr<int32_t> ip(v, c);
    auto e = catch_invalid([&] { ip.check("kv_indptr", 4); });
    EXPECT_EQ(e.field(), "kv_indptr");
    EXPECT_EQ(e.index(), 3);
    EXPECT_NE(e.detail().find("5 < 7"), std::string::npos) << e.what();
  }
}

TEST(Indptr, TotalMustMatch) {
  Indptr<int32_t> ip({0, 2, 5}, C::Csr);
  EXPECT_NO_THROW(ip.check("qo_indptr", 2, 5));
  auto e = catch_invalid([&] { ip.check("qo_indptr", 2, 6); });
  EXPECT_EQ(e.index(), 2);
  Indptr<int64_t> off({0, 7}, C::OffsetsOnly);
  EXPECT_NO_THROW(off.check("mask_indptr", 2, 7));  // a last request of size 0 may start at the end
  e = catch_invalid([&] { off.check("mask_indptr", 2, 6); });
  EXPECT_EQ(e.index(), 1);
}

TEST(Indptr, RawPointerCheck) {
  const int64_t v[] = {0, 3, 3, 8};
  EXPECT_NO_THROW(check_indptr<int64_t>("mask_indptr", v, 4, C::Csr, 3, 8));
  EXPECT_NO_THROW(check_indptr<int64_t>("mask_indptr", v, 3, C::OffsetsOnly, 3, 8));
  auto e = catch_invalid([&] { check_indptr<int64_t>("mask_indptr", nullptr, 4, C::Csr, 3); });
  EXPECT_EQ(e.field(), "mask_indptr");
  EXPECT_EQ(e.index(), -1);
  e = catch_invalid([&] { check_indptr<int64_t>("mask_indptr", v, 4, static_cast<C>(7), 3); });
  EXPECT_EQ(e.index(), -1);
  e = catch_invalid([&] { check_indptr<int64_t>("mask_indptr", v, 4, C::Csr, -1); });
  EXPECT_EQ(e.index(), -1);
}

}  // namespace
}  // namespace mlaverify::model

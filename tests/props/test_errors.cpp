// Every InvalidInput the props library raises, each checked for its field and index: unknown
// property or mutant names, bad environment overrides, bad slot permutations, null inner backends.
#include <gtest/gtest.h>

#include <cstdlib>

#include "mlaverify/error.h"
#include "model/model_backend.h"
#include "props/campaign.h"
#include "props/mutants.h"
#include "tests/support/expect_invalid.h"

namespace mlaverify::props {
namespace {

using mlaverify::testing::expect_invalid;

TEST(PropsErrors, UnknownPropertyListsKnownOnes) {
  expect_invalid([] { property_by_name("vs_modle"); }, "property", -1);
  try {
    property_by_name("nope");
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("vs_model"), std::string::npos);
  }
}

TEST(PropsErrors, NullInnerBackend) {
  expect_invalid([] { make_mutant(Mutant::NoMscale, nullptr); }, "inner", -1);
}

TEST(PropsErrors, UnknownMutant) {
  expect_invalid([] { mutant_info(static_cast<Mutant>(99)); }, "mutant", 99);
  auto inner = std::make_shared<model::ModelBackend>();
  expect_invalid([&] { make_mutant("rope_first", inner); }, "mutant", -1);
  EXPECT_EQ(make_mutant("rope_first_read", inner)->name(), "mutant:rope_first_read(model)");
}

TEST(PropsErrors, EnvironmentOverrides) {
  setenv("MLAV_SEED", "12x", 1);
  expect_invalid([] { seed_from_env(1); }, "MLAV_SEED", -1);
  setenv("MLAV_SEED", "42", 1);
  EXPECT_EQ(seed_from_env(1), 42u);
  unsetenv("MLAV_SEED");
  EXPECT_EQ(seed_from_env(7), 7u);
  setenv("MLAV_CASES", "0", 1);
  expect_invalid([] { cases_from_env(1); }, "MLAV_CASES", -1);
  setenv("MLAV_CASES", "abc", 1);
  expect_invalid([] { cases_from_env(1); }, "MLAV_CASES", -1);
  setenv("MLAV_CASES", "5", 1);
  EXPECT_EQ(cases_from_env(1), 5);
  unsetenv("MLAV_CASES");
}

TEST(PropsErrors, BadSlotPermutation) {
  Case c;
  c.requests = {{{-1, 0}, 3}};
  model::VerifyBatch b = build_batch(c);
  const int64_t n = b.pool().num_slots();
  std::vector<int64_t> perm = random_slot_permutation(n, 1);
  EXPECT_EQ(perm[0], 0);
  expect_invalid([&] { apply_slot_permutation(b, std::vector<int64_t>(3, 0)); }, "perm", -1);
  auto moved_sink = perm;
  std::swap(moved_sink[0], moved_sink[1]);
  expect_invalid([&] { apply_slot_permutation(b, moved_sink); }, "perm", 0);
  auto repeated = perm;
  repeated[2] = repeated[1];
  expect_invalid([&] { apply_slot_permutation(b, repeated); }, "perm", 2);
  auto outside = perm;
  outside[1] = n;
  expect_invalid([&] { apply_slot_permutation(b, outside); }, "perm", 1);
}

TEST(PropsErrors, ReplayOfUnknownPropertyOrInvalidCase) {
  model::ModelBackend m;
  scenarios::Scenario sc;
  sc.spec.requests = {{{-1}, 0}};
  sc.property = "nope";
  expect_invalid([&] { replay(sc, m); }, "property", -1);
  sc.property = "vs_model";
  sc.spec.requests[0].parents = {-1, 1};  // node 1 its own parent
  expect_invalid([&] { replay(sc, m); }, "case.requests[0].parents", 1);
  sc.spec.requests[0].parents = {-1, 0};
  EXPECT_TRUE(replay(sc, m).ok);
}

}  // namespace
}  // namespace mlaverify::props

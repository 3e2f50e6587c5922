// The fault build of the CPU backend: with no fault it still matches the model, and each injected
// fault, on a small case aimed at it, moves some output beyond the derived bound (so it can be
// found).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/attention.h"
#include "tests/cpu/case_fixture.h"
#include "tests/cpu/error_bound.h"

namespace mlaverify::cpu::testing {
namespace {

// Requests of `c` whose outputs are beyond the bound of the model (0: the run looks correct).
int requests_beyond_bound(Case& c, CpuFault fault) {
  CpuBackend backend({.threads = 2, .fault = fault});
  c.poison_outputs();
  VerifyParams p = c.params();
  backend.run(p);
  const model::RefResult ref = model::reference_verify(p);
  int beyond = 0;
  for (int32_t i = 0; i < c.batch(); ++i) {
    const RequestMagnitudes mag = magnitudes(p, i);
    const ErrorBound bound =
        cpu_error_bound(mag, c.spec().sm_scale, c.spec().num_splits, c.spec().o_dtype);
    beyond += !compare_request(p, ref, i, bound, mag).ok();
  }
  return beyond;
}

// A case aimed at each fault: few keys, so a key too many or too few carries a large weight.
CaseSpec aimed_at(CpuFault fault) {
  CaseSpec spec;
  spec.heads = 2;
  spec.value_scale = 0.5;  // scores of order 1: weights spread over the few keys
  spec.seed = base_seed() + static_cast<uint64_t>(fault);
  switch (fault) {
    case CpuFault::MergeWithoutRescale:
      spec.parents = {{-1, 0, 1}, {-1, 0}};
      spec.prefix_lens = {300, 150};
      spec.num_splits = 3;
      break;
    case CpuFault::EmptySplitAsZeros:
      // Three of four splits are empty; the bogus lse = 0 partials weigh exp(-M) ~ 1/N each.
      spec.parents = {{-1}, {-1, 0}};
      spec.prefix_lens = {1, 0};
      spec.num_splits = 4;
      break;
    case CpuFault::SplitEndOffByOne:
      spec.parents = {{-1}, {-1, 0}};
      spec.prefix_lens = {2, 65};
      break;
    case CpuFault::ParentOnlyMask:
      spec.parents = {{-1, 0, 1, 2}, {-1, 0, 1, 1}};
      spec.prefix_lens = {1, 0};
      break;
    case CpuFault::NoDiagonal:
      spec.parents = {{-1}, {-1, 0, 0}};
      spec.prefix_lens = {0, 2};
      break;
    case CpuFault::OverReadNextRequest:
      spec.parents = {{-1}, {-1, 0}, {-1}};
      spec.prefix_lens = {2, 3, 1};
      break;
    case CpuFault::BalancedRangesFromCap:
      // One block: the balanced plan gives request 0 (5 tiles) one split where the uniform plan
      // of 4 has 3 non-empty ones, so its split 0 cut as one of 4 covers 128 of the 300 keys.
      spec.parents = {{-1}, {-1, 0}};
      spec.prefix_lens = {300, 0};
      spec.num_splits = 4;
      spec.plan_blocks = 1;
      break;
    case CpuFault::VFromWrongColumns:
    case CpuFault::None:
      spec.parents = {{-1, 0, 0}, {-1}};
      spec.prefix_lens = {70, 3};
      break;
  }
  return spec;
}

TEST(CpuFaults, BuildHonoursFaults) {
  EXPECT_TRUE(CpuBackend::faults_compiled_in());
  CpuBackend backend({.threads = 1, .fault = CpuFault::NoDiagonal});
  EXPECT_EQ(backend.name(), "cpu[fault=NoDiagonal]");
}

TEST(CpuFaults, NoFaultMatchesModelOnEveryAimedCase) {
  for (CpuFault f : kAllCpuFaults) {
    for (DraftKvSource source : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      CaseSpec spec = aimed_at(f);
      spec.draft_source = source;
      Case c(spec);
      EXPECT_EQ(requests_beyond_bound(c, CpuFault::None), 0)
          << "case aimed at " << fault_name(f) << ", source " << static_cast<int>(source);
    }
  }
}

TEST(CpuFaults, EveryFaultIsVisibleBeyondTheBound) {
  for (CpuFault f : kAllCpuFaults) {
    for (DraftKvSource source : {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots}) {
      CaseSpec spec = aimed_at(f);
      spec.draft_source = source;
      Case c(spec);
      EXPECT_GT(requests_beyond_bound(c, f), 0)
          << fault_name(f) << " went unnoticed, source " << static_cast<int>(source);
    }
  }
}

}  // namespace
}  // namespace mlaverify::cpu::testing

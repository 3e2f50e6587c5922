// The property suite against every available backend (model, cpu; cuda when built and a device
// is present): a fixed-seed campaign, and every shipped scenario replayed. No false positives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cpu/cpu_backend.h"
#include "model/model_backend.h"
#include "props/campaign.h"
#include "scenarios/scenario.h"

#if defined(MLAV_PROPS_HAVE_CUDA)
#include "cuda/cuda_backend.h"
#endif

namespace mlaverify::props {
namespace {

struct Named {
  std::string name;
  BackendPtr backend;
};

std::vector<Named> backends() {
  std::vector<Named> out;
  out.push_back({"model", std::make_shared<model::ModelBackend>()});
  out.push_back({"cpu", cpu::make_cpu_backend()});
  // The CPU backend on the folded plan the wgmma kernel runs (draft tiles in split 0's sequence).
  out.push_back({"cpu_folded", cpu::make_cpu_backend({.folded = true})});
#if defined(MLAV_PROPS_HAVE_CUDA)
  if (cuda::cuda_device_available()) out.push_back({"cuda", std::make_shared<cuda::CudaBackend>()});
#endif
  return out;
}

class PropertySuite : public ::testing::TestWithParam<std::string> {};

BackendPtr backend_named(const std::string& name) {
  for (auto& b : backends()) {
    if (b.name == name) return b.backend;
  }
  return nullptr;
}

// Cases per campaign: MLAV_CASES (CI's fresh-seed run sets it), else a count sized for 2 cores:
// each case runs 9 properties (about 16 backend launches and two double-precision references),
// ~1.6 s per case on the CPU backend. The model backend is itself the reference (its campaign
// checks the metamorphic properties and the harness), and ~2x slower: it gets half the cases.
TEST_P(PropertySuite, CampaignFindsNothing) {
  BackendPtr b = backend_named(GetParam());
  if (!b) GTEST_SKIP() << "backend " << GetParam() << " not available";
  CampaignOptions o;
  o.seed = seed_from_env(20261129);
  o.cases = cases_from_env(60);
  if (GetParam() == "model") o.cases = std::max(1, o.cases / 2);
  // The folded plan shares everything with "cpu" but how a request's keys are cut into
  // partials: half the cases, to keep CI's time.
  if (GetParam() == "cpu_folded") o.cases = std::max(1, o.cases / 2);
  o.out_dir = std::filesystem::path(MLAV_PROPS_OUT_DIR) / "failures";
  std::printf(
      "property campaign on %s: MLAV_SEED=%llu MLAV_CASES=%d (rerun with these to "
      "reproduce)\n",
      b->name().c_str(), static_cast<unsigned long long>(o.seed), o.cases);
  FuzzReport r = run_campaign(*b, o);
  std::printf("%s", r.to_string().c_str());
  EXPECT_TRUE(r.ok()) << r.to_string();
  // The suite must have exercised every property (a property that always skips tests nothing).
  for (const auto& s : r.stats) {
    EXPECT_GT(s.passed, 0) << s.property << " never ran to completion";
  }
}

TEST_P(PropertySuite, ShippedScenariosReplay) {
  BackendPtr b = backend_named(GetParam());
  if (!b) GTEST_SKIP() << "backend " << GetParam() << " not available";
  auto files = scenarios::list_scenarios(MLAV_SCENARIO_CASES_DIR);
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    scenarios::Scenario sc = scenarios::load_scenario(f);
    PropertyResult r = replay(sc, *b);
    EXPECT_TRUE(r.ok) << f.filename().string() << ": " << r.detail;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PropertySuite,
                         ::testing::Values(std::string("model"), std::string("cpu"),
                                           std::string("cpu_folded")
#if defined(MLAV_PROPS_HAVE_CUDA)
                                                                     ,
                                           std::string("cuda")
#endif
                                               ),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mlaverify::props

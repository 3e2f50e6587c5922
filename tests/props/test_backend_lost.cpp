// A backend lost mid-campaign (BackendLost: a CUDA kernel fault poisons the context, so every
// later run fails whatever its input). The campaign must stop at that case and keep it as
// generated: shrinking against a dead backend "succeeds" on every simpler case it tries, which is
// how an illegal address found by the CUDA property suite once shrank to bs 1, P 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include <unistd.h>

#include "cpu/cpu_backend.h"
#include "mlaverify/error.h"
#include "props/campaign.h"
#include "props/mutants.h"
#include "scenarios/scenario.h"
#include "tests/support/forwarding_backend.h"

namespace mlaverify::props {
namespace {

// Forwards to `inner` until run number `lose_at` (1-based), which and every run after it throw
// BackendLost, as CudaBackend does after a kernel fault.
class LosesItsDevice final : public mlaverify::testing::ForwardingBackend {
 public:
  LosesItsDevice(BackendPtr inner, int32_t lose_at)
      : ForwardingBackend(std::move(inner)), lose_at_(lose_at) {}
  void run(const VerifyParams& p) override {
    if (++runs >= lose_at_) throw BackendLost("device lost at run " + std::to_string(lose_at_));
    ForwardingBackend::run(p);
  }
  int32_t runs = 0;

 private:
  int32_t lose_at_;
};

CampaignOptions twenty_cases() {
  CampaignOptions o;
  o.seed = 20261201;
  o.cases = 20;
  return o;
}

TEST(BackendLost, CampaignStopsAtTheCaseAndKeepsItUnshrunk) {
  int32_t lost_case = -1;
  CampaignOptions o = twenty_cases();
  LosesItsDevice backend(cpu::make_cpu_backend(), 40);  // a few cases in (a case runs ~10-20)
  o.on_generated = [&](int32_t n, const Case&) {
    if (backend.runs < 40) lost_case = n;  // the case being run when run 40 comes
  };
  const FuzzReport r = run_campaign(backend, o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.backend_lost());
  ASSERT_EQ(r.failures.size(), 1u) << r.to_string();
  const Failure& f = r.failures[0];
  EXPECT_TRUE(f.backend_lost);
  EXPECT_EQ(f.case_index, lost_case + 1);
  EXPECT_EQ(r.cases_run, lost_case + 1);  // nothing after it
  EXPECT_EQ(f.shrink_evals, 0);
  EXPECT_EQ(f.shrunk.spec, f.original);
  EXPECT_NE(f.detail.find("backend lost: device lost at run 40"), std::string::npos) << f.detail;
  EXPECT_NE(f.shrunk.note.find("not shrunk"), std::string::npos) << f.shrunk.note;
  EXPECT_NE(f.lost_note.find("not shrunk"), std::string::npos) << f.lost_note;
  EXPECT_TRUE(f.lost_file.empty());  // the case itself is the one that lost it
  const std::string text = r.to_string();
  EXPECT_NE(text.find("BACKEND LOST: the campaign stopped after case " +
                      std::to_string(f.case_index) + " of 20"),
            std::string::npos)
      << text;
  EXPECT_EQ(backend.runs, 40);  // no run was attempted after the loss
}

// A real failure (a mutant's wrong output) whose shrinking meets the loss: the shrink keeps the
// last case that failed while the backend still ran, and the campaign stops there.
TEST(BackendLost, ShrinkingStopsAtTheLoss) {
  // First find how many runs the mutant's first failure and two shrink steps take on a live
  // backend, then lose the device just after them.
  CampaignOptions o = twenty_cases();
  o.properties = {"vs_model"};
  const BackendPtr live_mutant = make_mutant("rope_first_read", cpu::make_cpu_backend());
  LosesItsDevice counting(live_mutant, 1 << 30);
  const FuzzReport live = run_campaign(counting, o);
  ASSERT_EQ(live.failures.size(), 1u) << live.to_string();
  ASSERT_GE(live.failures[0].shrink_steps, 2) << "need a failure that shrinks";
  // vs_model runs the backend once per evaluation (the CPU backend skips no case), so the
  // failing case is run number case_index (every earlier case passed with one run each) and
  // shrink evaluation e is run case_index + e: lose at the second one.
  const int32_t first_fail_run = live.failures[0].case_index;
  LosesItsDevice backend(make_mutant("rope_first_read", cpu::make_cpu_backend()),
                         first_fail_run + 2);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mlav_backend_lost_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  o.out_dir = dir;
  const FuzzReport r = run_campaign(backend, o);
  ASSERT_EQ(r.failures.size(), 1u) << r.to_string();
  const Failure& f = r.failures[0];
  EXPECT_TRUE(r.backend_lost());
  EXPECT_TRUE(f.backend_lost);
  EXPECT_EQ(f.case_index, live.failures[0].case_index);
  EXPECT_EQ(f.shrink_evals, 2);
  EXPECT_LE(f.shrink_steps, 1);  // only the first evaluation ran on a live backend
  EXPECT_EQ(f.detail.find("backend lost"), std::string::npos) << f.detail;  // a live result
  EXPECT_NE(f.shrunk.note.find("shrinking stopped"), std::string::npos) << f.shrunk.note;
  EXPECT_EQ(r.cases_run, f.case_index);
  // Both cases are written: the last live failure, and beside it the candidate that lost it (a
  // simpler case than the live one's starting point, so different from the original).
  ASSERT_FALSE(f.file.empty());
  ASSERT_FALSE(f.lost_file.empty());
  EXPECT_TRUE(std::filesystem::exists(f.file));
  const scenarios::Scenario lost = scenarios::load_scenario(f.lost_file);
  EXPECT_FALSE(lost.spec == f.shrunk.spec);
  EXPECT_NE(lost.note.find(f.file.filename().string()), std::string::npos) << lost.note;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mlaverify::props

// The CUDA kernel as a MLAV_MEMORY_CUDA plugin (libmlaverify_cuda_plugin.so, dlopen): the whole
// property suite through the ABI's device path gives the in-process CudaBackend's verdicts and
// bit-identical outputs on every run, in process and guarded (CUDA initialized only in the
// worker). Without a GPU every case skips with the reason; loading and refusing run everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "mlaverify/error.h"
#include "plugin/guarded.h"
#include "plugin/plugin_backend.h"
#include "props/campaign.h"
#include "props/case.h"
#include "tests/plugin/plugin_testing.h"

namespace mlaverify::plugin {
namespace {

// The plugin's path: the build's, or MLAV_CUDA_PLUGIN from the environment (the device run
// carries the built files to another folder).
std::string plugin_path() {
  const char* e = std::getenv("MLAV_CUDA_PLUGIN");
  return e != nullptr && *e != '\0' ? std::string(e) : std::string(MLAV_CUDA_PLUGIN);
}

// The plugin that loses its context on purpose (fault_cuda_plugin.cu): its path, as above.
std::string fault_plugin_path() {
  const char* e = std::getenv("MLAV_FAULT_CUDA_PLUGIN");
  return e != nullptr && *e != '\0' ? std::string(e) : std::string(MLAV_FAULT_CUDA_PLUGIN);
}

props::Case small_case() {
  props::Case c;
  c.requests = {{{-1, 0, 1, 1}, 70}, {{-1, 0}, 5}};
  c.num_heads = 8;
  c.seed = 3;
  return c;
}

// Loads without a device too: the table is fine, can_implement says why it cannot run.
TEST(CudaPlugin, LoadsAndSaysWhyWithoutADevice) {
  auto b = load_plugin(plugin_path());
  EXPECT_EQ(b->name(), "plugin:cuda");
  EXPECT_EQ(b->memory(), MLAV_MEMORY_CUDA);
  if (Support dev = cuda::cuda_device_available(); !dev) {
    model::VerifyBatch batch = props::build_batch(small_case());
    const Support s = b->can_implement(batch.params());
    EXPECT_FALSE(s);
    EXPECT_NE(s.reason.find("CUDA"), std::string::npos) << s.reason;
    // Guarded: the worker loads it and answers the same refusal (CUDA is touched only there).
    GuardedPluginBackend g(parse_plugin_spec(plugin_path() + "?guarded"));
    EXPECT_EQ(g.name(), "plugin:cuda[guarded]");
    const Support gs = g.can_implement(batch.params());
    EXPECT_FALSE(gs);
    EXPECT_EQ(gs.reason, s.reason);
    std::printf("[cuda plugin] no CUDA device (%s): loaded, and can_implement refuses with: %s\n",
                dev.reason.c_str(), s.reason.c_str());
  }
}

void suite_equals_in_process(Backend& plugin_backend, const char* what) {
  cuda::CudaBackend in_process;
  props::CampaignOptions o;
  o.cases = props::cases_from_env(40);
  o.seed = props::seed_from_env(20261203);
  // Both campaigns draw inside the plugin's declaration (narrower than the in-process backend's:
  // token_i64 only), so they generate the same cases.
  o.gen.caps = plugin_backend.capabilities();
  const testing::CampaignPair r = testing::run_same_campaign(in_process, plugin_backend, o);
  const props::FuzzReport& rb = r.plugin;
  for (const props::PropertyStats& s : rb.stats) EXPECT_TRUE(s.ran()) << s.property;
  std::printf(
      "[%s] %d cases x %zu properties, %lld runs: in-process cuda %.1f s, plugin %.1f s; "
      "%zu failure(s) in both\n%s",
      what, rb.cases_run, rb.stats.size(), static_cast<long long>(r.plugin_runs), r.in_process_s,
      r.plugin_s, rb.failures.size(), rb.to_string().c_str());
}

TEST(CudaPlugin, WholePropertySuiteEqualsInProcessBackend) {
  if (Support dev = cuda::cuda_device_available(); !dev) {
    GTEST_SKIP() << "no CUDA device: " << dev.reason;
  }
  auto b = load_plugin(plugin_path());
  suite_equals_in_process(*b, "cuda plugin");
}

TEST(CudaPlugin, GuardedSuiteEqualsInProcessBackend) {
  if (Support dev = cuda::cuda_device_available(); !dev) {
    GTEST_SKIP() << "no CUDA device: " << dev.reason;
  }
  GuardedPluginBackend g(parse_plugin_spec(plugin_path() + "?guarded"));
  suite_equals_in_process(g, "cuda plugin, guarded");
  EXPECT_EQ(g.workers_started(), 1);
}

// The fault plugin's two batches: batch size 1 runs, batch size 2 faults (config fault_bs=2).
struct FaultBatches {
  model::VerifyBatch plain = props::build_batch(first_request_of(small_case()));
  model::VerifyBatch faulting = props::build_batch(small_case());
  static props::Case first_request_of(props::Case c) {
    c.requests.resize(1);
    return c;
  }
};

// The death test's child: a live run, the faulting one and a plain one after it; 0 when both
// of the last two threw BackendLost with the same text (the loss is reported as it was met, not
// rediscovered by a later runtime call, whose message would name that call), when can_implement
// then throws BackendLost with that text without asking the plugin, and, with `fail` (the plugin's
// faulting run also returns an error), when the first text keeps what the plugin said.
int lost_runs_exit_code(bool fail) {
  auto b = load_plugin(fault_plugin_path(), fail ? "fault_bs=2,fail" : "fault_bs=2");
  FaultBatches f;
  model::VerifyBatch &plain = f.plain, &faulting = f.faulting;
  b->run(plain.params());  // a live context first
  std::vector<std::string> lost;
  for (model::VerifyBatch* batch : {&faulting, &plain}) {
    try {
      b->run(batch->params());
    } catch (const BackendLost& e) {
      lost.push_back(e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "not BackendLost: %s\n", e.what());
    }
  }
  if (lost.size() != 2) return 4;
  std::fprintf(stderr, "first: %s\nlater: %s\n", lost[0].c_str(), lost[1].c_str());
  if (lost[0].find("context is lost") == std::string::npos) return 5;
  const bool said = lost[0].find("failed on purpose") != std::string::npos;
  if (said != fail) return 6;
  // The staging keeps the loss as it met it; the plugin's words were on the faulting run's.
  if (!fail && lost[1] != lost[0]) return 7;
  if (fail && lost[0].rfind(lost[1], 0) != 0) return 7;
  try {
    (void)b->can_implement(plain.params());
    return 8;
  } catch (const BackendLost& e) {
    if (e.what() != lost[1]) return 9;
  }
  return 0;
}

// A plugin's kernel fault loses the process's CUDA context. In process, that run and every later
// one throw BackendLost (a campaign stops at the case, as with CudaBackend). In a child process of
// its own (a death test), since nothing after it could run CUDA; batch size 2 faults, batch size
// 1 does not.
TEST(CudaPluginLostDeathTest, InProcessFaultIsBackendLostOnEveryLaterRun) {
  if (Support dev = cuda::cuda_device_available(); !dev) {
    GTEST_SKIP() << "no CUDA device: " << dev.reason;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(lost_runs_exit_code(false)), ::testing::ExitedWithCode(0), "");
}

// The same when the plugin also reports its faulting run as an error: its text is in the loss.
TEST(CudaPluginLostDeathTest, TheLossKeepsThePluginsOwnError) {
  if (Support dev = cuda::cuda_device_available(); !dev) {
    GTEST_SKIP() << "no CUDA device: " << dev.reason;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(lost_runs_exit_code(true)), ::testing::ExitedWithCode(0), "");
}

// Guarded, the fault is the worker's: the run fails as a case does (not BackendLost), the worker
// exits, and the next call runs in a fresh worker with a live context, so a campaign goes on
// shrinking the case.
TEST(CudaPlugin, GuardedFaultFailsTheRunAndAFreshWorkerRunsTheNext) {
  if (Support dev = cuda::cuda_device_available(); !dev) {
    GTEST_SKIP() << "no CUDA device: " << dev.reason;
  }
  GuardedPluginBackend g(parse_plugin_spec(fault_plugin_path() + "?guarded&fault_bs=2"));
  FaultBatches f;
  model::VerifyBatch &plain = f.plain, &faulting = f.faulting;
  g.run(plain.params());
  std::string why;
  try {
    g.run(faulting.params());
  } catch (const BackendLost& e) {
    ADD_FAILURE() << "BackendLost from a guarded run: " << e.what();
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("context is lost"), std::string::npos) << why;
  EXPECT_NE(why.find("a new worker starts"), std::string::npos) << why;
  EXPECT_NO_THROW(g.run(plain.params()));
  EXPECT_EQ(g.workers_started(), 2);
  std::printf("[cuda plugin, guarded] a faulting run: %s\n", why.c_str());
}

}  // namespace
}  // namespace mlaverify::plugin

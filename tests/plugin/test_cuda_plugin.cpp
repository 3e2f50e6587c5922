// The CUDA kernel as a MLAV_MEMORY_CUDA plugin (libmlaverify_cuda_plugin.so, dlopen): the whole
// property suite through the ABI's device path gives the in-process CudaBackend's verdicts and
// bit-identical outputs on every run, in process and guarded (CUDA initialized only in the
// worker). Without a GPU every case skips with the reason; loading and refusing run everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda/cuda_backend.h"
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

}  // namespace
}  // namespace mlaverify::plugin

// Guarded runs (plugin/guarded.h): the CPU plugin in a worker process gives the in-process
// backend's outputs bit for bit; each fault of the faulty test plugin (a write past or before an
// output, into a row t >= T, into a stride gap, past lse or the workspace, into an input; a
// crash; a hang) is reported, and in a campaign it is a failing case that is shrunk and written
// as a scenario while the other properties and cases go on.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "mlaverify/error.h"
#include "plugin/guarded.h"
#include "plugin/plugin_backend.h"
#include "props/campaign.h"
#include "props/case.h"
#include "scenarios/scenario.h"
#include "tests/plugin/plugin_testing.h"

namespace mlaverify::plugin {
namespace {

std::shared_ptr<GuardedPluginBackend> guarded(const std::string& path, const std::string& items) {
  PluginSpec s = parse_plugin_spec(path + "?guarded&" + items);
  return std::make_shared<GuardedPluginBackend>(s);
}

props::Case small_case() {
  props::Case c;
  c.requests = {{{-1, 0, 1, 1}, 30}, {{-1, 0}, 5}, {{-1}, 12}};
  c.num_heads = 2;
  c.seed = 3;
  return c;
}

// The message of the std::runtime_error a run throws ("" when it passes).
std::string run_error(Backend& b, VerifyParams p) {
  try {
    b.run(p);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Guarded, CpuPluginEqualsInProcessOverTheSuite) {
  auto in_process = cpu::make_cpu_backend();
  auto g = guarded(MLAV_CPU_PLUGIN, "timeout=120");
  EXPECT_EQ(g->name(), "plugin:cpu[guarded]");
  props::CampaignOptions o;
  o.cases = props::cases_from_env(12);
  o.seed = props::seed_from_env(20261202);
  o.gen.caps.balanced_plan = false;  // the ABI carries no plan_blocks: the uniform plan on both
  const testing::CampaignPair r = testing::run_same_campaign(*in_process, *g, o);
  const props::FuzzReport& rb = r.plugin;
  EXPECT_TRUE(rb.ok()) << rb.to_string();  // no false alarm from the guards
  EXPECT_EQ(g->workers_started(), 1);
  std::printf(
      "[guarded] %d cases x %zu properties, %lld guarded runs: in-process %.1f s, "
      "guarded %.1f s\n",
      rb.cases_run, rb.stats.size(), static_cast<long long>(r.plugin_runs), r.in_process_s,
      r.plugin_s);
}

// Each fault, one run of a fixed case: reported with the buffer and the side, outputs of a clean
// run unchanged. The clean plugin passes the same run (no false positive).
TEST(Guarded, EachOutOfBoundsWriteIsReported) {
  model::VerifyBatch batch = props::build_batch(small_case());
  const VerifyParams p = batch.params();
  const int64_t T = p.qo_indptr[p.batch_size];
  ASSERT_EQ(T, 7);
  EXPECT_EQ(run_error(*guarded(MLAV_FAULTY_PLUGIN, "fault=none"), p), "");
  struct Expect {
    const char* fault;
    std::vector<std::string> words;
  };
  const std::vector<Expect> cases = {
      {"past_end", {"o_lat: after the end of the buffer, bytes +0..+1", "request 2"}},
      {"before_start", {"o_lat: before the start of the buffer, bytes -2..-1"}},
      {"lse_past_end", {"lse: after the end of the buffer, bytes +0..+3"}},
      {"ws_past_end", {"workspace: after its end", "bytes +0..+0"}},
      {"input_write", {"q: input modified from byte 0"}},
      {"no_lse", {"lse: token 0 head 0 (request 0) (the plugin does not declare writes_lse)"}},
  };
  for (const Expect& e : cases) {
    SCOPED_TRACE(e.fault);
    const std::string err =
        run_error(*guarded(MLAV_FAULTY_PLUGIN, std::string("fault=") + e.fault), p);
    EXPECT_NE(err.find("out-of-bounds write"), std::string::npos) << err;
    for (const std::string& w : e.words) EXPECT_NE(err.find(w), std::string::npos) << err;
  }
}

TEST(Guarded, RowsPastTAndStrideGapsMustStayUntouched) {
  model::VerifyBatch batch = props::build_batch(small_case());
  VerifyParams p = batch.params();
  const int64_t T = p.qo_indptr[p.batch_size];
  // Room for rows t >= T and a head stride with a gap: 2 spare rows, 8 elements between heads.
  p.max_total_q = T + 2;
  std::vector<float> q_rows(static_cast<size_t>(p.max_total_q * p.q_token_stride));
  std::vector<unsigned char> ext;
  // q and k_extend must hold max_total_q rows too: copy the batch's and pad with zeros.
  const size_t q_elem = dtype_bytes(p.q_dtype);
  std::vector<unsigned char> q(static_cast<size_t>(p.max_total_q * p.q_token_stride) * q_elem, 0);
  std::memcpy(q.data(), p.q, static_cast<size_t>(T * p.q_token_stride) * q_elem);
  p.q = q.data();
  if (p.draft_source == DraftKvSource::ExtendRows) {
    const size_t kb = dtype_bytes(p.kv_dtype);
    ext.assign(static_cast<size_t>(p.max_total_q * p.k_extend_stride) * kb, 0);
    std::memcpy(ext.data(), p.k_extend, static_cast<size_t>(T * p.k_extend_stride) * kb);
    p.k_extend = ext.data();
  }
  p.o_head_stride = kLatentDim + 8;
  p.o_token_stride = p.num_heads * p.o_head_stride;
  std::vector<unsigned char> o(static_cast<size_t>(p.max_total_q * p.o_token_stride) *
                               dtype_bytes(p.o_dtype));
  std::vector<float> lse(static_cast<size_t>(p.max_total_q * p.num_heads));
  p.o_lat = o.data();
  p.lse = lse.data();
  // A clean run writes the real rows and leaves the caller's bytes elsewhere as they were.
  std::fill(o.begin(), o.end(), 0x11);
  EXPECT_EQ(run_error(*guarded(MLAV_FAULTY_PLUGIN, "fault=none"), p), "");
  const size_t eb = dtype_bytes(p.o_dtype);
  for (size_t b = static_cast<size_t>(T * p.o_token_stride) * eb; b < o.size(); ++b) {
    ASSERT_EQ(o[b], 0x11) << "row t >= T changed at byte " << b;
  }
  for (size_t b = kLatentDim * eb; b < static_cast<size_t>(p.o_head_stride) * eb; ++b) {
    ASSERT_EQ(o[b], 0x11) << "head-stride gap changed at byte " << b;
  }
  EXPECT_NE(o[0], 0x11);  // and the real rows were written
  const std::string row = run_error(*guarded(MLAV_FAULTY_PLUGIN, "fault=row_after"), p);
  EXPECT_NE(row.find("o_lat: token 7 head 0 column 0 (row t >= T = 7, after the last request, 2)"),
            std::string::npos)
      << row;
  const std::string gap = run_error(*guarded(MLAV_FAULTY_PLUGIN, "fault=head_gap"), p);
  EXPECT_NE(gap.find("o_lat: token 0 head 0 column 512 (head-stride gap) (request 0)"),
            std::string::npos)
      << gap;
}

TEST(Guarded, ACrashIsAFailingCallAndTheNextCallGetsANewWorker) {
  model::VerifyBatch big = props::build_batch(small_case());  // P = 30 >= 20: crashes
  props::Case c = small_case();
  for (auto& r : c.requests) r.prefix_len = std::min<int64_t>(r.prefix_len, 10);
  model::VerifyBatch small = props::build_batch(c);
  auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=crash&p=20");
  const std::string err = run_error(*g, big.params());
  EXPECT_NE(err.find("crashed: killed by signal 11"), std::string::npos) << err;
  EXPECT_NE(err.find("during run"), std::string::npos) << err;
  EXPECT_EQ(run_error(*g, small.params()), "");
  EXPECT_EQ(g->workers_started(), 2);
}

// The worker is a fresh process (fork + exec of mlaverify-plugin-worker), not a copy of this one.
TEST(Guarded, TheWorkerIsTheWorkerExecutable) {
  auto g = guarded(MLAV_CPU_PLUGIN, "");
  ASSERT_GT(g->worker_pid(), 0);
  const std::string exe =
      std::filesystem::read_symlink("/proc/" + std::to_string(g->worker_pid()) + "/exe");
  EXPECT_EQ(std::filesystem::path(exe).filename(), "mlaverify-plugin-worker") << exe;
}

// MLAV_PLUGIN_WORKER=fork: the same checks with a plain fork; a bad path is bad input.
TEST(Guarded, ForkOnlyWorkerAndABadWorkerPath) {
  setenv("MLAV_PLUGIN_WORKER", "fork", 1);
  {
    model::VerifyBatch big = props::build_batch(small_case());
    auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=crash&p=20");
    const std::string exe =
        std::filesystem::read_symlink("/proc/" + std::to_string(g->worker_pid()) + "/exe");
    EXPECT_EQ(std::filesystem::path(exe).filename(), "plugin_tests");  // a copy of this process
    EXPECT_NE(run_error(*g, big.params()).find("crashed: killed by signal 11"), std::string::npos);
    auto clean = guarded(MLAV_FAULTY_PLUGIN, "fault=past_end");
    EXPECT_NE(run_error(*clean, big.params()).find("o_lat: after the end"), std::string::npos);
  }
  setenv("MLAV_PLUGIN_WORKER", "/nonexistent/worker", 1);
  EXPECT_THROW(guarded(MLAV_CPU_PLUGIN, ""), InvalidInput);
  unsetenv("MLAV_PLUGIN_WORKER");
}

TEST(Guarded, AHangHitsTheTimeLimit) {
  model::VerifyBatch batch = props::build_batch(small_case());
  auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=hang&p=20&timeout=1");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = run_error(*g, batch.params());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(err.find("did not answer within the time limit of 1 s (hang)"), std::string::npos)
      << err;
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 10.0);
  props::Case c = small_case();
  for (auto& r : c.requests) r.prefix_len = 3;
  model::VerifyBatch ok = props::build_batch(c);
  EXPECT_EQ(run_error(*g, ok.params()), "");  // a new worker answers
}

int64_t max_prefix(const props::Case& c) {
  int64_t m = 0;
  for (const auto& r : c.requests) m = std::max(m, r.prefix_len);
  return m;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::path(MLAV_PLUGIN_OUT_DIR) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A campaign against a plugin that crashes on P >= 3 (any generator draws such cases): the crash
// is a failing case per property that runs the backend, shrunk to one request of exactly P = 3,
// written as a scenario, and the campaign runs every case (metadata, which never calls the
// backend, passes on all).
TEST(Guarded, CampaignShrinksACrashAndGoesOn) {
  auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=crash&p=3&timeout=60");
  props::CampaignOptions o;
  // Two properties that run the backend and one that does not (each crash respawns a worker:
  // ~140 shrink evaluations per property).
  o.properties = {"vs_model", "split_invariance", "metadata"};
  o.cases = 10;
  o.seed = 11;
  o.out_dir = fresh_dir("crash");
  const props::FuzzReport r = props::run_campaign(*g, o);
  std::printf("%s", r.to_string().c_str());
  EXPECT_EQ(r.cases_run, 10);
  ASSERT_EQ(r.failures.size(), 2u);
  for (const props::Failure& f : r.failures) {
    SCOPED_TRACE(f.property);
    EXPECT_NE(f.detail.find("crashed: killed by signal 11"), std::string::npos) << f.detail;
    EXPECT_EQ(f.shrunk.spec.batch_size(), 1);
    EXPECT_EQ(max_prefix(f.shrunk.spec), 3);
    ASSERT_TRUE(std::filesystem::exists(f.file)) << f.file;
    EXPECT_EQ(scenarios::load_scenario(f.file), f.shrunk);
  }
  for (const props::PropertyStats& s : r.stats) {
    if (s.property == "metadata") {
      EXPECT_EQ(s.passed, 10);
    }
  }
  EXPECT_GT(g->workers_started(), 1);
}

// The same for a write one row past the last real token: every property that runs the backend
// fails on its first case with the row named, shrinks, and is written.
TEST(Guarded, CampaignShrinksAnOutOfBoundsWrite) {
  auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=past_end");
  props::CampaignOptions o;
  o.cases = 4;
  o.seed = 12;
  o.out_dir = fresh_dir("past_end");
  const props::FuzzReport r = props::run_campaign(*g, o);
  std::printf("%s", r.to_string().c_str());
  EXPECT_EQ(r.cases_run, 4);
  ASSERT_FALSE(r.failures.empty());
  for (const props::Failure& f : r.failures) {
    SCOPED_TRACE(f.property);
    EXPECT_NE(f.detail.find("o_lat: after the end of the buffer"), std::string::npos) << f.detail;
    EXPECT_EQ(f.shrunk.spec.batch_size(), 1);
    EXPECT_TRUE(std::filesystem::exists(f.file));
  }
}

// A hang in a campaign: the time limit makes it a failing case (shrunk within a small budget,
// since every evaluation that hangs costs the limit) and the campaign runs every case.
TEST(Guarded, CampaignTurnsAHangIntoAFailingCase) {
  auto g = guarded(MLAV_FAULTY_PLUGIN, "fault=hang&p=3&timeout=1");
  props::CampaignOptions o;
  o.properties = {"vs_model", "metadata"};
  o.cases = 4;
  o.seed = 13;
  o.max_shrink_evals = 3;
  o.out_dir = fresh_dir("hang");
  const props::FuzzReport r = props::run_campaign(*g, o);
  std::printf("%s", r.to_string().c_str());
  EXPECT_EQ(r.cases_run, 4);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].property, "vs_model");
  EXPECT_NE(r.failures[0].detail.find("did not answer within the time limit of 1 s"),
            std::string::npos)
      << r.failures[0].detail;
  EXPECT_TRUE(std::filesystem::exists(r.failures[0].file));
  EXPECT_EQ(r.stats.back().passed, 4);  // metadata
}

#ifdef MLAV_CLI
int cli_status(const std::string& args) {
  const int s = std::system((std::string(MLAV_CLI) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

// End to end: `fuzz --backend plugin:...?guarded` on the crashing plugin exits 1 and writes the
// shrunk scenario; replaying it crashes again in a guarded run (exit 1) and passes on cpu.
TEST(GuardedCli, FuzzWritesTheCrashAndReplayReproducesIt) {
  const auto dir = fresh_dir("cli_crash");
  const std::string backend =
      std::string("'plugin:") + MLAV_FAULTY_PLUGIN + "?fault=crash&p=3&guarded'";
  EXPECT_EQ(cli_status("fuzz --cases 6 --seed 11 --property vs_model --out " + dir.string() +
                       " --backend " + backend),
            1);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(cli_status("replay " + files[0].string() + " --backend " + backend), 1);
  EXPECT_EQ(cli_status("replay " + files[0].string() + " --backend cpu"), 0);
}
#endif

}  // namespace
}  // namespace mlaverify::plugin

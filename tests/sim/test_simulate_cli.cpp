// `mlaverify simulate` end to end: a planted fault found by the command is written as a scenario
// that `mlaverify replay` runs alone (clean without the fault, reproduced with it); a bad trace
// file is one line naming the file, field and line, exit 2; CSV and plots are written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/simulate.h"

namespace mlaverify::cli {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mlav_sim_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int run(const std::string& args, const fs::path& dir) {
  const std::string cmd = std::string(MLAV_CLI_BINARY) + " " + args + " > " +
                          (dir / "stdout").string() + " 2> " + (dir / "stderr").string();
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SimulateCli, PlantedFaultBecomesAReplayableScenario) {
  const fs::path dir = fresh_dir("fault");
  SimulateOptions o;
  o.config.steps = 200;
  o.config.pool_size = 2048;
  o.config.page_size = 16;
  o.config.allocator = model::AllocatorKind::Paged;
  o.config.check_every = 0;
  o.config.fault = sim::PlantedFault::StrandedPartialTail;
  o.config.fault_step = 25;
  o.scenario_dir = dir / "failures";
  o.csv = dir / "m.csv";
  std::ostringstream out;
  const SimulateResult r = run_simulate(o, out);
  EXPECT_EQ(r.exit_code, kExitFail) << out.str();
  ASSERT_EQ(r.scenarios.size(), 1u) << out.str();
  EXPECT_NE(slurp(o.csv).find("leaked_slots"), std::string::npos);
  // The file replays alone through the replay command, on the binary as a user runs it.
  EXPECT_EQ(run("replay " + r.scenarios[0].string(), dir), kExitPass) << slurp(dir / "stdout");
  EXPECT_NE(slurp(dir / "stdout").find("reproduced on fault:stranded-partial-tail"),
            std::string::npos)
      << slurp(dir / "stdout");
  fs::remove_all(dir);
}

TEST(SimulateCli, AMutantKernelIsCaughtAndReplaysOnTheMutant) {
  const fs::path dir = fresh_dir("mutant");
  SimulateOptions o;
  o.backend = "mutant:sm_scale_576";
  o.config.steps = 40;
  o.config.check_every = 10;
  o.scenario_dir = dir / "failures";
  std::ostringstream out;
  const SimulateResult r = run_simulate(o, out);
  EXPECT_EQ(r.exit_code, kExitFail) << out.str();
  ASSERT_EQ(r.scenarios.size(), 1u) << out.str();
  EXPECT_NE(out.str().find("[attention]"), std::string::npos) << out.str();
  // The correct backend passes the step; the recorded mutant fails it again.
  EXPECT_EQ(run("replay " + r.scenarios[0].string(), dir), kExitPass) << slurp(dir / "stdout");
  EXPECT_NE(slurp(dir / "stdout").find("reproduced on mutant:sm_scale_576"), std::string::npos)
      << slurp(dir / "stdout");
  fs::remove_all(dir);
}

TEST(SimulateCli, CleanRunWritesCsvPlotsAndPasses) {
  const fs::path dir = fresh_dir("clean");
  const int rc =
      run("simulate --steps 120 --check-every 30 --pool-size 4096 --page-size 16 "
          "--defrag tier1-every --defrag-every 20 --graph-sizes 1,2,4,8,16 --csv " +
              (dir / "m.csv").string() + " --plot " + (dir / "p").string(),
          dir);
  EXPECT_EQ(rc, kExitPass) << slurp(dir / "stdout") << slurp(dir / "stderr");
  EXPECT_NE(slurp(dir / "stdout").find("steps/s"), std::string::npos);
  EXPECT_GT(fs::file_size(dir / "p.png"), 1000u);
  EXPECT_NE(slurp(dir / "p.svg").find("<svg"), std::string::npos);
  const std::string csv = slurp(dir / "m.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 121);
  fs::remove_all(dir);
}

TEST(SimulateCli, JsonDocumentOnStdout) {
  const fs::path dir = fresh_dir("json");
  EXPECT_EQ(run("simulate --steps 30 --check-every 10 --json", dir), kExitPass);
  const std::string out = slurp(dir / "stdout");
  EXPECT_EQ(out.rfind("{\"command\":\"simulate\"", 0), 0u) << out;
  EXPECT_NE(out.find("\"checked_steps\":2"), std::string::npos) << out;
  EXPECT_NE(out.find("\"max_leaked_slots\":0"), std::string::npos) << out;
  EXPECT_NE(slurp(dir / "stderr").find("steps/s"), std::string::npos);  // the summary
  fs::remove_all(dir);
}

TEST(SimulateCli, BadTraceIsOneLineAndExitTwo) {
  const fs::path dir = fresh_dir("trace");
  const fs::path trace = dir / "t.csv";
  std::ofstream(trace) << "arrival_step,prompt_len,output_len\n0,64,8\n2,64,-1\n";
  EXPECT_EQ(run("simulate --steps 10 --trace " + trace.string(), dir), kExitBadInput);
  const std::string err = slurp(dir / "stderr");
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find(trace.string() + ": output_len"), std::string::npos) << err;
  EXPECT_NE(err.find("3"), std::string::npos) << err;  // the line
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlaverify::cli

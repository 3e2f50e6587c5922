// The CLI's commands end to end: a mutant found by `fuzz` is written as a scenario that `replay`
// passes on the correct backend and reproduces on the mutant; bad names and files are named errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "mlaverify/error.h"

namespace mlaverify::cli {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mlav_cli_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(Cli, UnknownBackendNamesTheField) {
  try {
    make_backend("triton");
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "backend");
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  FuzzOptions o;
  o.backend = "mutant:no_such_mutant";
  std::ostringstream out;
  EXPECT_THROW(fuzz(o, out), InvalidInput);
}

TEST(Cli, CorrectBackendPassesShortCampaign) {
  FuzzOptions o;
  o.backend = "cpu";
  o.cases = 4;
  o.seed = 7;
  std::ostringstream out;
  EXPECT_EQ(fuzz(o, out), 0) << out.str();
}

// rope_first_read breaks vs_model on any case with at least one key, so 4 cases suffice; the
// shrunk file must pass on cpu and still fail on the mutant when replayed.
TEST(Cli, FuzzFindsMutantAndReplayReproducesIt) {
  const std::filesystem::path dir = fresh_dir("fuzz");
  FuzzOptions o;
  o.backend = "mutant:rope_first_read";
  o.cases = 4;
  o.seed = 11;
  o.properties = {"vs_model"};
  o.out_dir = dir;
  std::ostringstream out;
  ASSERT_EQ(fuzz(o, out), 1) << out.str();
  ASSERT_FALSE(std::filesystem::is_empty(dir)) << out.str();

  ReplayOptions r;
  r.backend = "cpu";
  r.paths = {dir};
  std::ostringstream replay_out;
  EXPECT_EQ(replay(r, replay_out), 0) << replay_out.str();
  EXPECT_NE(replay_out.str().find("reproduced on mutant:rope_first_read"), std::string::npos)
      << replay_out.str();

  // Replayed on the mutant itself, the scenario fails: exit 1.
  r.backend = "mutant:rope_first_read";
  std::ostringstream on_mutant;
  EXPECT_EQ(replay(r, on_mutant), 1) << on_mutant.str();
}

TEST(Cli, ReplayRejectsCorruptFile) {
  const std::filesystem::path dir = fresh_dir("corrupt");
  std::ofstream(dir / "bad.json") << "{\"spec\": {\"requests\": [{\"parents\": [3]}]}";
  ReplayOptions r;
  r.paths = {dir / "bad.json"};
  std::ostringstream out;
  EXPECT_THROW(replay(r, out), InvalidInput);
}

}  // namespace
}  // namespace mlaverify::cli

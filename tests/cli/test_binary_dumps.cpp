// The dump commands as a user runs them: replay, diagnose and show on the shipped SGLang dumps
// and on damaged copies, by exit code, output lines and --json documents.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
const fs::path kDumps = MLAV_DUMPS_DIR;

struct Exec {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path dir_for(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("mlav_bindump_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Exec run(std::vector<std::string> args) {
  static int n = 0;
  const fs::path d = dir_for("run" + std::to_string(n++));
  const std::string out = (d / "out").string(), err = (d / "err").string();
  args.insert(args.begin(), MLAV_CLI_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    ADD_FAILURE() << "spawn failed";
    return {};
  }
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// A copy of a shipped dump with `n` bytes at `offset` of the tensor data overwritten by 0x7f:
// offsets inside o turn elements into large numbers (0x7f7f is ~3.4e38 in bf16).
fs::path damaged(const std::string& name, size_t from_end, size_t n) {
  std::string bytes = slurp(kDumps / "k2_eagle16.safetensors");
  const fs::path p = dir_for("dmg") / name;
  // q is the last float tensor before custom_mask; o precedes q. Offsets from the end of the
  // file land in custom_mask (4112 bytes), then q, then o: see the header in the dump's README.
  for (size_t k = 0; k < n; ++k) bytes[bytes.size() - from_end + k] = '\x7f';
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

TEST(BinaryDumps, ShippedDumpsReplayGreen) {
  const Exec e = run({"replay", kDumps.string()});
  EXPECT_EQ(e.code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("server: PASS"), std::string::npos) << e.out;
  const Exec j = run({"replay", "--json", (kDumps / "k2_padded.safetensors").string()});
  ASSERT_EQ(j.code, 0) << j.out << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["pass"].get<bool>());
  EXPECT_EQ(doc["padded_requests"].get<int>(), 2);
  EXPECT_TRUE(doc["server"]["requests"][2]["padded"].get<bool>());
}

TEST(BinaryDumps, OneBadElementIsAMismatchAndDiagnoseFindsNoSingleReading) {
  // 2 bytes inside o (o's data ends where q's begins: 64*8*576*2 bytes of q + the mask before
  // the end). One element of o becomes 0x7f7f.
  const size_t q_and_mask = 64 * 8 * 576 * 2 + 4112;
  const fs::path p = damaged("one.safetensors", q_and_mask + 1000, 2);
  const Exec e = run({"replay", p.string()});
  EXPECT_EQ(e.code, 1) << e.out << e.err;
  EXPECT_NE(e.out.find("server: FAIL"), std::string::npos) << e.out;
  const Exec d = run({"diagnose", "--json", p.string()});
  EXPECT_EQ(d.code, 1) << d.out << d.err;
  const auto doc = nlohmann::json::parse(d.out);
  EXPECT_FALSE(doc["as_given_explains"].get<bool>());
  EXPECT_NE(doc["verdict"].get<std::string>().find("no single reading"), std::string::npos);
}

TEST(BinaryDumps, BadFileIsOneLineExitTwo) {
  const fs::path p = dir_for("bad") / "trunc.safetensors";
  {
    std::string bytes = slurp(kDumps / "k2_padded.safetensors");
    bytes.resize(bytes.size() / 2);
    std::ofstream(p, std::ios::binary) << bytes;
  }
  for (const char* cmd : {"replay", "diagnose", "show"}) {
    const Exec e = run({cmd, p.string()});
    EXPECT_EQ(e.code, 2) << cmd << ": " << e.out << e.err;
    const std::string all = e.out + e.err;
    EXPECT_NE(all.find("trunc.safetensors"), std::string::npos) << cmd << ": " << all;
    EXPECT_NE(all.find("data_offsets"), std::string::npos) << cmd << ": " << all;
  }
  const Exec budget = run({"replay", "--max-memory", "1000", (kDumps / "k2_padded.safetensors").string()});
  EXPECT_EQ(budget.code, 2) << budget.out << budget.err;
  EXPECT_NE((budget.out + budget.err).find("memory budget"), std::string::npos);
}

TEST(BinaryDumps, DiagnoseAnswersTheLayoutAndIndptrQuestions) {
  const Exec e = run({"diagnose", (kDumps / "k2_eagle16.safetensors").string()});
  EXPECT_EQ(e.code, 0) << e.out << e.err;
  EXPECT_NE(e.out.find("cache row order: latent-first"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("mask_indptr: request i's mask at mask_indptr[i] (as given)"),
            std::string::npos)
      << e.out;
}

TEST(BinaryDumps, ShowWritesSvgAndPng) {
  const fs::path stem = dir_for("show") / "pic";
  const Exec e = run({"show", (kDumps / "k2_padded.safetensors").string(), "--out", stem.string()});
  EXPECT_EQ(e.code, 0) << e.out << e.err;
  const std::string png = slurp(stem.string() + ".png");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_NE(slurp(stem.string() + ".svg").find("<svg"), std::string::npos);
}

}  // namespace

// The mlaverify binary as a user runs it: spawned with posix_spawn (stdout and stderr to files,
// or stderr on a pseudo-terminal), checked by exit code, stderr lines and parsed --json output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

const fs::path kCases = MLAV_SCENARIO_CASES_DIR;

struct Exec {
  int code = -1;  // exit status, or -signal
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mlav_bin_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// Runs the binary with stdout and stderr redirected to files (neither is a terminal).
Exec mlaverify(std::vector<std::string> args) {
  static int counter = 0;
  const fs::path dir = fresh_dir("run" + std::to_string(counter++));
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  args.insert(args.begin(), MLAV_CLI_BINARY);
  std::vector<char*> argv = argv_of(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << rc;
    return {};
  }
  Exec r;
  r.code = wait_for(pid);
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove_all(dir);
  return r;
}

// Runs the binary with stderr on a pseudo-terminal (stdout to /dev/null); returns what the
// terminal received.
Exec mlaverify_on_terminal(std::vector<std::string> args) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    ADD_FAILURE() << "no pseudo-terminal: " << errno;
    return {};
  }
  const std::string slave = ptsname(master);
  args.insert(args.begin(), MLAV_CLI_BINARY);
  std::vector<char*> argv = argv_of(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, slave.c_str(), O_RDWR | O_NOCTTY, 0);
  posix_spawn_file_actions_addclose(&fa, master);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  Exec r;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    close(master);
    return r;
  }
  // Read while it runs (the terminal's buffer is small); EIO once the child has closed its side.
  char buf[4096];
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) {
      r.err.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  r.code = wait_for(pid);
  close(master);
  return r;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A shipped scenario with its first request's tree replaced: still well-formed JSON.
fs::path scenario_with_parents(const fs::path& dir, const std::string& parents) {
  std::string text = slurp(kCases / "hand_mtp_chain4_tile_plus_one.json");
  const std::string chain = "\"parents\": [-1, 0, 1, 2], \"prefix_len\": 65";
  const size_t at = text.find(chain);
  EXPECT_NE(at, std::string::npos) << "the shipped file changed";
  text.replace(at, chain.size(), "\"parents\": " + parents + ", \"prefix_len\": 65");
  const fs::path p = dir / "bad_parent.json";
  std::ofstream(p) << text;
  EXPECT_TRUE(nlohmann::json::accept(text)) << "the test file must be well-formed JSON";
  return p;
}

nlohmann::json parse_stdout(const Exec& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON document: " << e.what() << "\n" << r.out;
    return {};
  }
}

TEST(Binary, UsageErrorsExit2WithAHint) {
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"fuzz", "--bogus"},
                                             {"fuzz", "--cases", "0"},
                                             {"fuzz", "--cases", "many"},
                                             {"replay"},
                                             {"selfcheck", "--cases", "1", "extra"}}) {
    const Exec r = mlaverify(args);
    std::string cmd;
    for (const std::string& a : args) cmd += " " + a;
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "mlaverify: usage error: ")) << cmd << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "--help' for the options")) << cmd << "\n" << r.err;
  }
  EXPECT_TRUE(contains(mlaverify({"fuzz", "--bogus"}).err, "'mlaverify fuzz --help'"));
}

TEST(Binary, HelpDocumentsTheExitCodesAndExits0) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--help"}, {"fuzz", "--help"}, {"replay", "--help"}, {"merge", "--help"}}) {
    const Exec r = mlaverify(args);
    EXPECT_EQ(r.code, 0) << args[0] << "\n" << r.err;
    EXPECT_TRUE(contains(r.out, "Exit codes")) << r.out;
    EXPECT_TRUE(contains(r.out, "0  pass")) << r.out;
    EXPECT_TRUE(contains(r.out, "1  mismatch, or nothing verified")) << r.out;
    EXPECT_TRUE(contains(r.out, "2  bad input: usage error")) << r.out;
  }
  const Exec v = mlaverify({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_TRUE(contains(v.out, "mlaverify ")) << v.out;
}

TEST(Binary, UnknownBackendExits2NamingTheField) {
  Exec r = mlaverify({"fuzz", "--backend", "triton", "--cases", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "bad input: backend: unknown backend 'triton' (known: model, cpu"))
      << r.err;
  r = mlaverify({"replay", "--backend", "mutant:no_such",
                 (kCases / "class01_mask_indptr_shifted.json").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "backend: unknown mutant 'no_such'")) << r.err;
  r = mlaverify({"fuzz", "--property", "no_such_property", "--cases", "1"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "property: unknown property")) << r.err;
}

TEST(Binary, MalformedJsonExits2NamingTheFileAndOffset) {
  const fs::path dir = fresh_dir("malformed");
  const fs::path bad = dir / "truncated.json";
  std::ofstream(bad) << "{\"format\": \"mlaverify-scenario\", \"version\": 1, \"case\": {";
  const Exec r = mlaverify({"replay", bad.string()});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  // One line: the file, the field ("json" for a syntax error) and the byte offset.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("BAD  " + bad.string() + ": json\\[[0-9]+\\]: ")))
      << r.out;
}

// The parent check itself, reached through a well-formed file: node 1 of request 0 names parent
// 2, which does not come before it (parent >= t).
TEST(Binary, BadParentExits2NamingTheRequestAndNode) {
  const fs::path dir = fresh_dir("parent");
  const fs::path bad = scenario_with_parents(dir, "[-1, 2]");
  const Exec r = mlaverify({"replay", bad.string()});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "BAD  " + bad.string() + ": case.requests[0].parents[1]: parent 2"))
      << r.out;
  EXPECT_FALSE(contains(r.out, ": json")) << "reached the JSON parser's error, not the check";
  // And a root that is not -1 names node 0.
  const Exec root = mlaverify({"replay", scenario_with_parents(dir, "[0, 0]").string()});
  EXPECT_EQ(root.code, 2) << root.out;
  EXPECT_TRUE(contains(root.out, "case.requests[0].parents[0]")) << root.out;
}

// plan_blocks (optional: the balanced split plan) read strictly: each bad value is one line
// naming the file and case.plan_blocks, exit code 2; a good value replays green.
TEST(Binary, BadPlanBlocksExits2NamingTheField) {
  const fs::path dir = fresh_dir("plan_blocks");
  const std::string text = slurp(kCases / "hand_mtp_chain4_tile_plus_one.json");
  const std::string splits = "\"num_splits\": 2,";
  ASSERT_NE(text.find(splits), std::string::npos) << "the shipped file changed";
  auto with_plan = [&](const std::string& value, const std::string& name) {
    std::string t = text;
    t.replace(t.find(splits), splits.size(), splits + "\n    \"plan_blocks\": " + value + ",");
    const fs::path p = dir / name;
    std::ofstream(p) << t;
    EXPECT_TRUE(nlohmann::json::accept(t)) << "the test file must be well-formed JSON";
    return p;
  };
  int k = 0;
  for (const char* bad : {"-1", "1048577", "2.5", "\"x\""}) {
    const fs::path p = with_plan(bad, "bad" + std::to_string(k++) + ".json");
    const Exec r = mlaverify({"replay", p.string()});
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "BAD  " + p.string() + ": case.plan_blocks: ")) << bad << r.out;
  }
  const Exec good = mlaverify({"replay", with_plan("3", "good.json").string()});
  EXPECT_EQ(good.code, 0) << good.out << good.err;
}

// One bad file in a folder is reported, the others still run, and the summary counts each kind.
TEST(Binary, OneBadFileInAFolderTheRestStillRun) {
  const fs::path dir = fresh_dir("mixed");
  fs::copy_file(kCases / "hand_mtp_chain4_tile_plus_one.json", dir / "a_good.json");
  fs::copy_file(kCases / "class02_rope_first_read.json", dir / "c_good.json");
  fs::rename(scenario_with_parents(dir, "[-1, 2]"), dir / "b_bad.json");
  const Exec r = mlaverify({"replay", dir.string()});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "pass a_good.json")) << r.out;
  EXPECT_TRUE(contains(r.out, "BAD  " + (dir / "b_bad.json").string())) << r.out;
  EXPECT_TRUE(contains(r.out, "pass c_good.json")) << r.out;
  EXPECT_TRUE(contains(r.out, "replay: 2 passed, 0 failed, 1 bad input, 0 skipped")) << r.out;
}

TEST(Binary, EmptyFolderOrMissingPathIsBadInput) {
  const fs::path dir = fresh_dir("empty");
  Exec r = mlaverify({"replay", dir.string()});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "path: folder has no *.json scenario file")) << r.out;
  EXPECT_TRUE(contains(r.out, "0 passed, 0 failed, 1 bad input, 0 skipped")) << r.out;
  r = mlaverify({"replay", (dir / "nothing_here.json").string()});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "path: no such file or folder")) << r.out;
}

TEST(Binary, ShippedScenariosReplayGreen) {
  const Exec r = mlaverify({"replay", kCases.string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const size_t files = static_cast<size_t>(std::distance(fs::directory_iterator(kCases), {}));
  EXPECT_TRUE(contains(
      r.out, "replay: " + std::to_string(files) + " passed, 0 failed, 0 bad input, 0 skipped"))
      << r.out;
}

TEST(Binary, MutantFuzzExits1) {
  const Exec r = mlaverify({"fuzz", "--backend", "mutant:rope_first_read", "--cases", "4", "--seed",
                            "11", "--property", "vs_model"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAILED vs_model at case 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "verdict: FAIL")) << r.out;
}

TEST(Binary, JsonOnEveryCommandParses) {
  const fs::path dir = fresh_dir("json");
  struct Expect {
    std::vector<std::string> args;
    int code;
  };
  const std::vector<Expect> runs = {
      {{"selfcheck", "--cases", "1", "--json"}, 0},
      {{"fuzz", "--cases", "2", "--property", "vs_model", "--json"}, 0},
      {{"fuzz", "--backend", "mutant:rope_first_read", "--cases", "2", "--seed", "11", "--property",
        "vs_model", "--json"},
       1},
      {{"replay", "--json", (kCases / "class02_rope_first_read.json").string()}, 0},
      {{"replay", "--json", dir.string()}, 2},
      {{"backends", "--json"}, 0},
      {{"fuzz", "--backend", "triton", "--json"}, 2},
  };
  for (const Expect& e : runs) {
    const Exec r = mlaverify(e.args);
    EXPECT_EQ(r.code, e.code) << e.args[0] << r.err;
    const nlohmann::json j = parse_stdout(r);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j.value("command", ""), e.args[0]) << r.out;
    EXPECT_EQ(j.value("exit_code", -1), e.code) << r.out;
  }
  nlohmann::json j = parse_stdout(mlaverify({"backends", "--json"}));
  EXPECT_EQ(j["backends"][0], "model");
  EXPECT_EQ(j["mutants"][0], "mutant:mask_indptr_shifted");
  j = parse_stdout(mlaverify({"fuzz", "--backend", "triton", "--json"}));
  EXPECT_EQ(j["error"]["field"], "backend");
  j = parse_stdout(mlaverify({"replay", "--json", scenario_with_parents(dir, "[-1, 2]").string()}));
  ASSERT_EQ(j["scenarios"].size(), 1u) << j.dump();
  EXPECT_EQ(j["scenarios"][0]["status"], "bad_input");
  EXPECT_EQ(j["scenarios"][0]["field"], "case.requests[0].parents");
  EXPECT_EQ(j["scenarios"][0]["index"], 1);
  j = parse_stdout(mlaverify(
      {"fuzz", "--cases", "3", "--property", "vs_model", "--property", "metadata", "--json"}));
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_EQ(j["cases_run"], 3);
  ASSERT_EQ(j["stats"].size(), 2u);
  EXPECT_EQ(j["stats"][1]["property"], "metadata");
  EXPECT_EQ(j["stats"][1]["passed"], 3);
}

// Piped (not a terminal), progress is plain lines: counts, elapsed time and cases/s, no escapes.
TEST(Binary, FuzzProgressIsPlainLinesWhenPiped) {
  const Exec r = mlaverify({"fuzz", "--cases", "3", "--property", "metadata"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("  3/3 cases  [0-9.]+ s  [0-9.]+ cases/s\n")))
      << r.err;
  for (const std::string* s : {&r.out, &r.err}) {
    EXPECT_EQ(s->find('\033'), std::string::npos) << *s;
    EXPECT_EQ(s->find('\r'), std::string::npos) << *s;
  }
}

// On a terminal the same progress is one redrawn bar.
TEST(Binary, FuzzProgressIsABarOnATerminal) {
  const Exec r = mlaverify_on_terminal({"fuzz", "--cases", "3", "--property", "metadata"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "\r\033[2K  [")) << r.err;
  EXPECT_TRUE(contains(r.err, "] 3/3 cases")) << r.err;
  EXPECT_TRUE(contains(r.err, "cases/s")) << r.err;
}

// The N shards of a campaign run exactly its cases: case counts add up, and the digest of the
// cases' identities (index and full scenario JSON, summed) of the merged shards is the unsharded
// campaign's. Per-property counts add up to the unsharded ones.
TEST(Binary, ShardsTogetherRunExactlyTheCampaign) {
  const fs::path dir = fresh_dir("shards");
  const std::vector<std::string> campaign = {"fuzz",       "--cases",  "7",          "--seed",  "5",
                                             "--property", "vs_model", "--property", "metadata"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = campaign;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const Exec whole = mlaverify(with({"--report", (dir / "whole.json").string()}));
  ASSERT_EQ(whole.code, 0) << whole.err;
  std::vector<std::string> merge = {"merge", "--json"};
  std::set<std::string> digests;
  for (int k = 0; k < 3; ++k) {
    const fs::path report = dir / ("shard" + std::to_string(k) + ".json");
    const Exec r =
        mlaverify(with({"--shard", std::to_string(k) + "/3", "--report", report.string()}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    digests.insert(nlohmann::json::parse(slurp(report))["case_digest"].get<std::string>());
    merge.push_back(report.string());
  }
  EXPECT_EQ(digests.size(), 3u) << "shards ran the same cases";
  const Exec merged = mlaverify(merge);
  EXPECT_EQ(merged.code, 0) << merged.err;
  const nlohmann::json m = parse_stdout(merged);
  const nlohmann::json w = nlohmann::json::parse(slurp(dir / "whole.json"));
  EXPECT_EQ(m["cases_run"], 7);
  EXPECT_EQ(m["case_digest"], w["case_digest"]);
  EXPECT_EQ(m["merged_shards"], nlohmann::json::array({0, 1, 2}));
  for (size_t p = 0; p < 2; ++p) {
    for (const char* field : {"property", "passed", "failed", "skipped"}) {
      EXPECT_EQ(m["stats"][p][field], w["stats"][p][field]) << field;
    }
  }
}

TEST(Binary, MergeRefusesWhatIsNotOneCampaign) {
  const fs::path dir = fresh_dir("merge");
  auto shard = [&](const std::string& name, const std::string& seed, const std::string& spec) {
    const fs::path report = dir / name;
    const Exec r = mlaverify({"fuzz", "--cases", "4", "--seed", seed, "--property", "metadata",
                              "--shard", spec, "--report", report.string()});
    EXPECT_EQ(r.code, 0) << r.err;
    return report.string();
  };
  const std::string a0 = shard("a0.json", "1", "0/2"), a1 = shard("a1.json", "1", "1/2");
  const std::string b1 = shard("b1.json", "2", "1/2");
  EXPECT_EQ(mlaverify({"merge", a0, a1}).code, 0);
  Exec r = mlaverify({"merge", a0, b1});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "seed: '2' in " + b1)) << r.err;
  r = mlaverify({"merge", a0});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "missing shard(s) 1 of 2")) << r.err;
  r = mlaverify({"merge", a0, a1, a1});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "shard_index[1]: given twice")) << r.err;
  std::ofstream(dir / "junk.json") << "{\"format\": \"mlaverify-fuzz-report\"";
  r = mlaverify({"merge", a0, (dir / "junk.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "json[")) << r.err;
  // A shard that failed makes the merged campaign fail.
  const fs::path m0 = dir / "m0.json", m1 = dir / "m1.json";
  for (const auto& [spec, file] : {std::pair{"0/2", m0}, std::pair{"1/2", m1}}) {
    mlaverify({"fuzz", "--backend", "mutant:rope_first_read", "--cases", "4", "--seed", "11",
               "--property", "vs_model", "--shard", spec, "--report", file.string()});
  }
  r = mlaverify({"merge", m0.string(), m1.string()});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "FAILED vs_model")) << r.out;
}

TEST(Binary, ShardOptionErrorsAreBadInput) {
  for (const char* spec : {"3/3", "a/b", "0/0", "1"}) {
    const Exec r = mlaverify({"fuzz", "--cases", "4", "--shard", spec});
    EXPECT_EQ(r.code, 2) << spec << r.err;
    EXPECT_TRUE(contains(r.err, "bad input: shard: ")) << r.err;
  }
  // More shards than cases: a shard with nothing to run is the job's mistake, not a pass.
  const Exec r = mlaverify({"fuzz", "--cases", "2", "--shard", "2/3"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "has no case for shard 2/3")) << r.err;
}

}  // namespace

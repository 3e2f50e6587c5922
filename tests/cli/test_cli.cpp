// The CLI's commands end to end: a mutant found by `fuzz` is written as a scenario that `replay`
// passes on the correct backend and reproduces on the mutant; bad names and files are named errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/json_io.h"
#include "mlaverify/backend.h"
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

// A corrupt file is bad input (exit 2) naming the JSON field; it is reported, not thrown, so the
// other files of the run still replay.
TEST(Cli, ReplayReportsCorruptFileAsBadInput) {
  const std::filesystem::path dir = fresh_dir("corrupt");
  std::ofstream(dir / "bad.json") << "{\"spec\": {\"requests\": [{\"parents\": [3]}]}";
  ReplayOptions r;
  r.paths = {dir / "bad.json"};
  std::ostringstream out;
  const ReplayResult res = run_replay(r, out);
  EXPECT_EQ(res.exit_code, kExitBadInput) << out.str();
  ASSERT_EQ(res.entries.size(), 1u);
  EXPECT_EQ(res.entries[0].status, "bad_input");
  EXPECT_EQ(res.entries[0].field, "json") << res.entries[0].detail;
}

// A backend that refuses every case (a GPU backend without a GPU, a kernel without the generated
// formats): what it refused was not verified, which is never green.
class RefuseAll : public Backend {
 public:
  std::string name() const override { return "refuse-all"; }
  Support can_implement(const VerifyParams&) const override {
    return Support::no("no device for this test");
  }
  size_t workspace_bytes(const VerifyParams&) const override { return 0; }
  void run(const VerifyParams&) override { throw Unsupported("no device for this test"); }
};

TEST(Cli, CampaignOnARefusingBackendIsNotGreen) {
  RefuseAll backend;
  FuzzOptions o;
  o.backend = "refuse-all";
  o.cases = 3;
  o.properties = {"vs_model", "metadata"};
  std::ostringstream out;
  const CampaignReport r = run_fuzz(backend, o, out);
  EXPECT_EQ(r.exit_code, kExitFail) << out.str();
  EXPECT_TRUE(r.failures.empty()) << out.str();
  // metadata checks the batch's metadata without running the backend, so it ran: only vs_model
  // is named, even though the campaign as a whole checked something.
  ASSERT_EQ(r.not_verified.size(), 1u) << out.str();
  EXPECT_EQ(r.stats[1].passed, 3) << out.str();
  EXPECT_NE(r.not_verified[0].find("vs_model never ran"), std::string::npos) << r.not_verified[0];
  EXPECT_NE(r.not_verified[0].find("no device for this test"), std::string::npos)
      << r.not_verified[0];
  EXPECT_NE(out.str().find("NOT VERIFIED: vs_model never ran"), std::string::npos) << out.str();
}

TEST(Cli, SelfcheckOnARefusingBackendIsNotGreen) {
  RefuseAll backend;
  SelfcheckOptions o;
  o.cases_per_config = 1;
  std::ostringstream out;
  const SelfcheckResult r = run_selfcheck(backend, backend, o, out);
  EXPECT_EQ(r.exit_code, kExitFail) << out.str();
  EXPECT_EQ(r.failed, 0) << out.str();
  EXPECT_NE(out.str().find("NOT VERIFIED: vs_model never ran on the model"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("NOT VERIFIED: cpu vs_model skipped"), std::string::npos) << out.str();
  // The real pair passes.
  std::ostringstream real;
  EXPECT_EQ(run_selfcheck(o, real).exit_code, kExitPass) << real.str();
}

TEST(Cli, ReplayOnARefusingBackendIsNotGreen) {
  ReplayOptions r;
  r.paths = {std::filesystem::path(MLAV_SCENARIO_CASES_DIR) / "hand_mtp_chain4_tile_plus_one.json"};
  RefuseAll backend;
  std::ostringstream out;
  ReplayResult res = run_replay(backend, r, out);
  EXPECT_EQ(res.exit_code, kExitFail) << out.str();
  EXPECT_EQ(res.skipped, 1) << out.str();
  EXPECT_NE(out.str().find("1 scenario(s) skipped by refuse-all"), std::string::npos) << out.str();
  // --allow-skipped forgives a skip, but not a replay in which nothing ran at all.
  r.allow_skipped = true;
  std::ostringstream out2;
  res = run_replay(backend, r, out2);
  EXPECT_EQ(res.exit_code, kExitFail) << out2.str();
  EXPECT_NE(out2.str().find("every scenario was skipped"), std::string::npos) << out2.str();
  // ... and with the CPU backend the same file is green.
  std::ostringstream out3;
  EXPECT_EQ(run_replay(*make_backend("cpu"), r, out3).exit_code, kExitPass) << out3.str();
}

// The merge contract at the function level: shards of one campaign only, each exactly once.
TEST(Cli, MergeRefusesReportsOfDifferentCampaigns) {
  CampaignReport a;
  a.backend = "cpu";
  a.seed = 1;
  a.cases = 4;
  a.properties = {"vs_model"};
  a.stats = {{"vs_model", 2, 0, 0, ""}};
  a.shard_count = 2;
  a.cases_run = 2;
  CampaignReport b = a;
  b.shard_index = 1;
  EXPECT_EQ(merge_reports({a, b}, {"a", "b"}).exit_code, kExitPass);
  EXPECT_EQ(merge_reports({a, b}, {"a", "b"}).cases_run, 4);
  auto field_of = [](const std::vector<CampaignReport>& shards) {
    try {
      merge_reports(shards, {"a", "b", "c"});
    } catch (const InvalidInput& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  CampaignReport other_seed = b;
  other_seed.seed = 2;
  EXPECT_EQ(field_of({a, other_seed}), "seed");
  CampaignReport other_backend = b;
  other_backend.backend = "cpu-folded";
  EXPECT_EQ(field_of({a, other_backend}), "backend");
  CampaignReport other_props = b;
  other_props.properties = {"metadata"};
  EXPECT_EQ(field_of({a, other_props}), "properties");
  CampaignReport other_count = b;
  other_count.shard_count = 3;
  EXPECT_EQ(field_of({a, other_count}), "shard_count");
  EXPECT_EQ(field_of({a}), "shard_index");        // shard 1 missing
  EXPECT_EQ(field_of({a, b, b}), "shard_index");  // shard 1 twice
  CampaignReport short_run = b;
  short_run.cases_run = 1;
  EXPECT_EQ(field_of({a, short_run}), "cases_run");
  // ... unless its backend was lost there (a CUDA kernel fault stops the run at its failure):
  // then the merge takes it, and is itself a lost, failed run.
  CampaignReport lost = short_run;
  lost.backend_lost = true;
  lost.stats = {{"vs_model", 0, 1, 0, ""}};
  lost.failures = {{"vs_model", 2, 0, 0, "bs 1", "backend lost: device gone", ""}};
  const CampaignReport merged = merge_reports({a, lost}, {"a", "lost"});
  EXPECT_TRUE(merged.backend_lost);
  EXPECT_EQ(merged.cases_run, 3);
  EXPECT_EQ(merged.exit_code, kExitFail);
  std::ostringstream text;
  print_campaign(merged, text);
  EXPECT_NE(text.str().find("BACKEND LOST"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("NOT VERIFIED"), std::string::npos) << text.str();
  CampaignReport lost_long = lost;
  lost_long.cases_run = 3;  // more than its share of 2, lost or not
  EXPECT_EQ(field_of({a, lost_long}), "cases_run");
}

// A report file is read strictly and held to what `fuzz` can write: each bad field is one
// InvalidInput naming it (a merge of the file then never sums counts past int32, nor lists a
// million missing shards).
TEST(Cli, ReportFilesAreReadStrictly) {
  CampaignReport a;
  a.backend = "cpu";
  a.seed = 1;
  a.cases = 6;
  a.properties = {"vs_model", "metadata"};
  a.stats = {{"vs_model", 2, 1, 0, ""}, {"metadata", 3, 0, 0, ""}};
  a.failures = {{"vs_model", 5, 2, 9, "bs 1", "o differs", ""}};
  a.shard_count = 2;
  a.cases_run = 3;
  a.seconds = 1.5;
  std::ostringstream doc;
  write_json("fuzz", a, doc);
  const nlohmann::json good = nlohmann::json::parse(doc.str());
  EXPECT_EQ(parse_report(good.dump(), "good").cases_run, 3);
  auto field_of = [&](auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    try {
      parse_report(j.dump(), "edited");
    } catch (const InvalidInput& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  using J = nlohmann::json;
  EXPECT_EQ(field_of([](J& j) { j["cases"] = 0; }), "cases");
  EXPECT_EQ(field_of([](J& j) { j["cases"] = kMaxCampaignCases + 1; }), "cases");
  EXPECT_EQ(field_of([](J& j) { j["shard_count"] = kMaxShards + 1; }), "shard_count");
  EXPECT_EQ(field_of([](J& j) { j["shard_index"] = 2; }), "shard_index");
  EXPECT_EQ(field_of([](J& j) { j["properties"][0] = "no_such_property"; }), "properties");
  EXPECT_EQ(field_of([](J& j) {
              j["properties"] = {"metadata", "vs_model"};
              std::swap(j["stats"][0], j["stats"][1]);
            }),
            "properties");  // all_properties() order, as fuzz writes them
  EXPECT_EQ(field_of([](J& j) { j["merged_shards"] = {1, 0}; }), "merged_shards");
  EXPECT_EQ(field_of([](J& j) { j["merged_shards"] = {0, 2}; }), "merged_shards");
  EXPECT_EQ(field_of([](J& j) { j["cases_run"] = 7; }), "cases_run");
  EXPECT_EQ(field_of([](J& j) { j["seconds"] = -1.0; }), "seconds");
  EXPECT_EQ(field_of([](J& j) { j["stats"][1]["passed"] = 4; }), "stats[1]");  // 4 > cases_run
  EXPECT_EQ(field_of([](J& j) { j["stats"][1]["skipped"] = -1; }), "stats[1]");
  EXPECT_EQ(field_of([](J& j) { j["stats"][0]["failed"] = 0; }), "failures");  // 1 entry, 0 failed
  EXPECT_EQ(field_of([](J& j) { j["failures"][0]["case_index"] = 0; }), "failures[0].case_index");
  EXPECT_EQ(field_of([](J& j) { j["failures"][0]["shrink_evals"] = -1; }), "failures[0]");
  EXPECT_EQ(field_of([](J& j) { j["backend_lost"] = 1; }), "backend_lost");
  EXPECT_EQ(field_of([](J& j) {
              j["backend_lost"] = true;
              j["failures"] = J::array();
              j["stats"][0]["failed"] = 0;
            }),
            "backend_lost");  // a lost backend comes with the failure it was lost on
  EXPECT_TRUE(([&] {
    J j = good;
    j["backend_lost"] = true;
    return parse_report(j.dump(), "lost").backend_lost;
  })());
  EXPECT_EQ(good.count("backend_lost"), 0u);  // written only when true
  // A number nlohmann cannot hold is malformed JSON, not an escaping out_of_range.
  std::string huge = good.dump();
  huge.replace(huge.find("1.5"), 3, "1e400");
  try {
    parse_report(huge, "huge");
    ADD_FAILURE() << "1e400 accepted";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "json");
  }
  // merge names a few missing shards of a large campaign, not all of them.
  CampaignReport big = a;
  big.failures.clear();
  big.stats = {{"vs_model", 0, 0, 0, ""}, {"metadata", 0, 0, 0, ""}};
  big.cases = 1000;
  big.shard_count = kMaxShards;
  big.cases_run = props::shard_cases(big.cases, 0, big.shard_count);
  try {
    merge_reports({big}, {"big"});
    ADD_FAILURE() << "one shard of a million merged";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "shard_index");
    EXPECT_NE(std::string(e.what()).find("and 999991 more"), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 400u);
  }
}

// Coverage travels with the report: --json carries a row per field value (an enumerated field's
// values partition the cases), a saved report reads back with its rows, and merging the shards of a
// campaign gives the unsharded campaign's rows.
TEST(Cli, CoverageRowsInTheReportAndTheMerge) {
  FuzzOptions o;
  o.backend = "cpu";
  o.cases = 8;
  o.seed = 5;
  o.properties = {"metadata"};  // no kernel run: the rows are about the generated cases
  std::ostringstream log;
  const CampaignReport whole = run_fuzz(*make_backend("cpu"), o, log);
  ASSERT_FALSE(whole.coverage.empty());
  // Fields whose values partition the cases (each case has exactly one of them; the layout
  // rows and edges may overlap or not apply).
  std::map<std::string, int32_t> per_field;
  for (const char* f : {"mask_format", "kv_dtype", "q_dtype", "o_dtype", "kv_layout",
                        "draft_source", "kv_indexing", "page_size", "slot_order"})
    per_field[f] = 0;
  for (const props::CoverageRow& row : whole.coverage)
    if (per_field.contains(row.field)) per_field[row.field] += row.cases;
  for (const auto& [field, n] : per_field) EXPECT_EQ(n, 8) << field;
  std::ostringstream doc;
  write_json("fuzz", whole, doc);
  const nlohmann::json j = nlohmann::json::parse(doc.str());
  ASSERT_EQ(j["coverage"].size(), whole.coverage.size());
  EXPECT_EQ(j["coverage"][0]["cases"], whole.coverage[0].cases);
  EXPECT_EQ(j["coverage_missing"].size(), whole.coverage_missing.size());

  std::vector<CampaignReport> shards;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mlav_cov_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int32_t k = 0; k < 2; ++k) {
    FuzzOptions sk = o;
    sk.shard_index = k;
    sk.shard_count = 2;
    const std::filesystem::path file = dir / ("s" + std::to_string(k) + ".json");
    save_report(file, run_fuzz(*make_backend("cpu"), sk, log));
    shards.push_back(load_report(file));  // through the file: the rows are read back
  }
  std::filesystem::remove_all(dir);
  const CampaignReport merged = merge_reports(shards, {"s0", "s1"});
  ASSERT_EQ(merged.coverage.size(), whole.coverage.size());
  for (size_t k = 0; k < whole.coverage.size(); ++k) {
    EXPECT_EQ(merged.coverage[k].field, whole.coverage[k].field);
    EXPECT_EQ(merged.coverage[k].value, whole.coverage[k].value);
    EXPECT_EQ(merged.coverage[k].cases, whole.coverage[k].cases) << whole.coverage[k].value;
  }
  EXPECT_EQ(merged.coverage_missing, whole.coverage_missing);
  // A shard without rows (a report from before they existed): the merge claims no coverage.
  shards[1].coverage.clear();
  EXPECT_TRUE(merge_reports(shards, {"s0", "s1"}).coverage.empty());
}

TEST(Cli, ShardSyntax) {
  int32_t k = -1, n = -1;
  parse_shard("3/8", k, n);
  EXPECT_EQ(k, 3);
  EXPECT_EQ(n, 8);
  for (const char* bad : {"8/8", "-1/8", "0/0", "3", "3/", "/8", "a/b", "3/8x", " 3/8"}) {
    EXPECT_THROW(parse_shard(bad, k, n), InvalidInput) << bad;
  }
}

}  // namespace
}  // namespace mlaverify::cli

// The C API's options (capi/c_options.h): strict types and ranges, null as absent, one
// InvalidInput naming options.<key> for anything else, and to_json reading back the same.
#include <gtest/gtest.h>

#include <string>

#include "capi/c_options.h"
#include "mlaverify/error.h"

namespace mlaverify::capi {
namespace {

// The InvalidInput's message for options `text` ("" when accepted).
template <typename F>
std::string rejection(F&& parse, const std::string& text) {
  try {
    parse(text.c_str());
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(COptions, FuzzOptionsAcceptExactTypesInRange) {
  const FuzzRequest r = parse_fuzz_options(
      R"({"cases": 1000000, "seed": 18446744073709551615, "properties": ["a", "b"],
          "out_dir": "x", "label": "mine", "shard": "1/4", "verbose": true})");
  EXPECT_EQ(r.cases, 1000000);
  EXPECT_EQ(r.seed, 18446744073709551615ull);
  EXPECT_EQ(r.properties, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.label, "mine");
  EXPECT_EQ(r.verbose, true);
  EXPECT_EQ(parse_fuzz_options(nullptr), FuzzRequest{});
  EXPECT_EQ(parse_fuzz_options(""), FuzzRequest{});
  EXPECT_EQ(parse_fuzz_options("null"), FuzzRequest{});
  EXPECT_EQ(parse_fuzz_options(R"({"cases": null, "seed": null})"), FuzzRequest{});
  EXPECT_EQ(parse_fuzz_options(R"({"seed": 0})").seed, 0u);
}

TEST(COptions, NothingIsNarrowedOrGuessed) {
  auto fuzz = [](const char* t) { return parse_fuzz_options(t); };
  // Each would have run a different campaign than asked: 2^32 + 1 cases wraps to 1, 2.5 to 2.
  EXPECT_NE(rejection(fuzz, R"({"cases": 4294967297})").find("options.cases"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"cases": 2.5})").find("wants an integer"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"cases": 0})").find("outside [1, 1000000]"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"cases": 1000001})").find("outside"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"cases": "10"})").find("wants an integer"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"seed": -1})").find("options.seed"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"seed": 18446744073709551616})").find("options.seed"),
            std::string::npos);  // 2^64: a float to the parser
  EXPECT_NE(rejection(fuzz, R"({"verbose": 1})").find("true or false"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"properties": ["a", 3]})").find("options.properties[1]"),
            std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"properties": "a"})").find("array of strings"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"case": 3})").find("options.case: unknown option"),
            std::string::npos);
  EXPECT_NE(rejection(fuzz, R"([1, 2])").find("not a JSON object"), std::string::npos);
  EXPECT_NE(rejection(fuzz, R"({"cases": 3)").find("]: not JSON"), std::string::npos);  // options[byte]
  // A number past a double's range is nlohmann's out_of_range, not a parse error (options_fuzzer
  // found it: fuzz/regressions/options/number_overflow).
  EXPECT_NE(rejection(fuzz, R"({"seed": 1E400})").find("options: not JSON"), std::string::npos);
}

TEST(COptions, ReplayAndDiagnoseLimits) {
  auto replay = [](const char* t) { return parse_replay_options(t); };
  auto diagnose = [](const char* t) { return parse_diagnose_options(t); };
  EXPECT_NE(rejection(replay, "{}").find("options.paths: nothing to replay"), std::string::npos);
  EXPECT_NE(rejection(replay, R"({"paths": []})").find("nothing to replay"), std::string::npos);
  const ReplayRequest r = parse_replay_options(
      R"({"paths": ["a.json"], "max_memory": 1, "max_seconds": 0.5, "check_recorded": false})");
  EXPECT_EQ(r.max_memory, 1);
  EXPECT_EQ(r.max_seconds, 0.5);
  EXPECT_EQ(r.check_recorded, false);
  EXPECT_FALSE(r.allow_skipped.has_value());
  EXPECT_NE(rejection(replay, R"({"paths": ["a"], "max_memory": 0})").find("options.max_memory"),
            std::string::npos);
  EXPECT_NE(rejection(replay, R"({"paths": ["a"], "max_seconds": -1})").find("> 0"),
            std::string::npos);
  EXPECT_NE(rejection(diagnose, R"({"max_seconds": "600"})").find("wants a number"),
            std::string::npos);
  EXPECT_NE(rejection(diagnose, R"({"max_memory": 1e9})").find("wants an integer"),
            std::string::npos);
  EXPECT_EQ(parse_diagnose_options(R"({"readings": []})").readings, std::vector<std::string>{});
}

TEST(COptions, ToJsonReadsBackTheSame) {
  const FuzzRequest f = parse_fuzz_options(R"({"cases": 7, "seed": 9, "shard": "0/2"})");
  EXPECT_EQ(parse_fuzz_options(to_json(f).dump().c_str()), f);
  const ReplayRequest r =
      parse_replay_options(R"({"paths": ["p"], "max_seconds": 0.1, "allow_skipped": true})");
  EXPECT_EQ(parse_replay_options(to_json(r).dump().c_str()), r);
  const DiagnoseRequest d = parse_diagnose_options(R"({"readings": ["x"], "max_memory": 5})");
  EXPECT_EQ(parse_diagnose_options(to_json(d).dump().c_str()), d);
}

}  // namespace
}  // namespace mlaverify::capi

// Tests of the scenario format: JSON round trip, and one rejection test per field checking that
// the InvalidInput names the JSON path and index at fault; the shipped cases all load.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mlaverify/error.h"
#include "mlaverify/split_plan.h"
#include "scenarios/scenario.h"

namespace mlaverify::scenarios {
namespace {

Scenario sample() {
  Scenario sc;
  sc.property = "vs_model";
  sc.backend = "cpu";
  sc.note = "hand-made";
  sc.spec.requests = {{{-1, 0, 0, 1}, 65}, {{-1}, 0}};
  sc.spec.num_heads = 4;
  sc.spec.sm_scale = 0.1308608;
  sc.spec.kv_dtype = DType::F32;
  sc.spec.layout = LayoutKind::Split;
  sc.spec.row_stride = 640;
  sc.spec.draft_source = DraftKvSource::CacheSlots;
  sc.spec.mask_format = MaskFormat::QlenOnlyBitpacking;
  sc.spec.mask_indptr_convention = IndptrConvention::OffsetsOnly;
  sc.spec.mask_word_bytes = 1;
  sc.spec.page_size = 16;
  sc.spec.slot_order = SlotOrder::Defragmented;
  sc.spec.graph_padded_bs = 4;
  sc.spec.poison_unused_slots = false;
  sc.spec.value_scale = 0.1;
  sc.spec.num_splits = 3;
  // Above 2^63: the seed is a full uint64 and must survive the round trip.
  sc.spec.seed = 0xfedcba9876543210ull;
  return sc;
}

// Expects parse_scenario(text) to throw InvalidInput with this field and index.
void expect_rejected(const std::string& text, const std::string& field, int64_t index) {
  try {
    parse_scenario(text);
    ADD_FAILURE() << "accepted, expected rejection of " << field << "[" << index << "]";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_EQ(e.index(), index) << e.what();
  }
}

// Replaces the first occurrence of `from` in the JSON text of the sample.
std::string sample_with(const std::string& from, const std::string& to) {
  std::string s = to_json(sample());
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Replaces the value of the n-th occurrence (0-based) of "key": with `value`, by bracket matching,
// so tests can change one field's type or shape without a JSON library in the test.
std::string replace_value(const std::string& key, const std::string& value, int nth = 0) {
  std::string s = to_json(sample());
  std::string pat = "\"" + key + "\": ";
  size_t at = s.find(pat);
  for (int k = 0; k < nth && at != std::string::npos; ++k) at = s.find(pat, at + 1);
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos) return s;
  size_t b = at + pat.size();
  size_t e = b;
  int depth = 0;
  bool in_str = false;
  for (; e < s.size(); ++e) {
    char c = s[e];
    if (in_str) {
      if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) break;
      --depth;
    } else if (c == ',' && depth == 0) {
      break;
    }
  }
  s.replace(b, e - b, value);
  return s;
}

TEST(Scenario, RoundTripIsExact) {
  Scenario a = sample();
  Scenario b = parse_scenario(to_json(a));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.spec.seed, 0xfedcba9876543210ull);
  EXPECT_EQ(b.spec.sm_scale, 0.1308608);  // 17 significant digits: exact
}

// Text fields keep their brackets: to_json compacts number lists of the JSON itself, never the
// contents of a string (the fuzzer found "trees=[,1]" written back as "[, 1]", "[1 2]" as "[12]").
TEST(Scenario, RoundTripKeepsBracketsInsideStrings) {
  Scenario a = sample();
  a.note = "trees=[,1] and [1 2] and \"[3,\n 4]\"";
  a.property = "vs_model";
  EXPECT_EQ(parse_scenario(to_json(a)).note, a.note);
}

TEST(Scenario, FileRoundTrip) {
  auto dir = std::filesystem::temp_directory_path() / "mlav_scenario_test";
  auto path = dir / "a.json";
  save_scenario(path, sample());
  EXPECT_EQ(load_scenario(path), sample());
  auto listed = list_scenarios(dir);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].filename(), "a.json");
  std::filesystem::remove_all(dir);
}

TEST(Scenario, MissingFileNamesPath) {
  try {
    load_scenario("/nonexistent/x.json");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "path");
  }
  EXPECT_THROW(list_scenarios("/nonexistent_dir_mlav"), InvalidInput);
}

TEST(Scenario, SyntaxErrorNamesByteOffset) {
  expect_rejected("{\"format\": ", "json", 11);
  expect_rejected("", "json", 0);
}

TEST(Scenario, DeepNestingRejectedBeforeParsing) {
  std::string deep(100000, '[');
  // The 33rd bracket (offset 32) is the first past the limit of 32 levels.
  expect_rejected(deep, "json", 32);
}

TEST(Scenario, TopLevelFields) {
  expect_rejected("[1, 2]", "", -1);
  expect_rejected(sample_with("\"format\": \"mlaverify-scenario\"", "\"format\": \"other\""),
                  "format", -1);
  expect_rejected(sample_with("\"version\": 1", "\"version\": 2"), "version", -1);
  expect_rejected(sample_with("\"property\": \"vs_model\"", "\"property\": 7"), "property", -1);
  expect_rejected(sample_with("\"backend\": \"cpu\",", ""), "backend", -1);
  expect_rejected(sample_with("\"note\": \"hand-made\"", "\"note\": null"), "note", -1);
  expect_rejected(sample_with("\"note\": \"hand-made\"", "\"colour\": 1"), "colour", -1);
}

TEST(Scenario, DuplicateKeysRejectedWithTheirPath) {
  // nlohmann alone would keep the last copy; a scenario must say each field once.
  expect_rejected(sample_with("\"version\": 1", "\"version\": 1, \"version\": 1"), "version", -1);
  expect_rejected(sample_with("\"prefix_len\": 0", "\"prefix_len\": 0, \"prefix_len\": 3"),
                  "case.requests[1].prefix_len", -1);
  expect_rejected(replace_value("num_heads", "16, \"num_heads\": 8"), "case.num_heads", -1);
  // The same key in two different objects is not a duplicate.
  EXPECT_NO_THROW(parse_scenario(to_json(sample())));
}

TEST(Scenario, RequestFields) {
  expect_rejected(replace_value("requests", "3"), "case.requests", -1);
  expect_rejected(replace_value("requests", "[]"), "case.requests", -1);
  expect_rejected(replace_value("requests", "[1]"), "case.requests[0]", -1);
  expect_rejected(replace_value("parents", "\"x\"", 1), "case.requests[1].parents", -1);
  expect_rejected(replace_value("parents", "[5, 0, 0, 1]"), "case.requests[0].parents", 0);
  // Node 3's parent 1 -> 3: a parent must come before its child.
  expect_rejected(replace_value("parents", "[-1, 0, 0, 3]"), "case.requests[0].parents", 3);
  expect_rejected(sample_with("\"prefix_len\": 65", "\"prefix_len\": -1"),
                  "case.requests[0].prefix_len", -1);
  expect_rejected(sample_with("\"prefix_len\": 0", "\"prefix_len\": 0.5"),
                  "case.requests[1].prefix_len", -1);
  expect_rejected(sample_with("\"prefix_len\": 0", "\"prefix_len\": 0, \"depth\": 1"),
                  "case.requests[1].depth", -1);
  expect_rejected(replace_value("parents", "[]"), "case.requests[0].parents", -1);
  expect_rejected(replace_value("parents", "[-1, 0, true]"), "case.requests[0].parents", 2);
  expect_rejected(replace_value("parents", "[-1, 0, 2000]"), "case.requests[0].parents", 2);
  expect_rejected(replace_value("prefix_len", "2000000"), "case.requests[0].prefix_len", -1);
  expect_rejected(replace_value("case", "[]"), "case", -1);
}

TEST(Scenario, EmptyTreeAndEmptyBatch) {
  Scenario sc = sample();
  sc.spec.requests[1].parents.clear();
  try {
    validate_case(sc.spec);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "case.requests[1].parents");
    EXPECT_EQ(e.index(), -1);
  }
  sc.spec.requests.clear();
  try {
    validate_case(sc.spec);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "case.requests");
  }
}

TEST(Scenario, ScalarFields) {
  expect_rejected(sample_with("\"num_heads\": 4", "\"num_heads\": 129"), "case.num_heads", -1);
  expect_rejected(sample_with("\"sm_scale\": 0.1308608", "\"sm_scale\": -1"), "case.sm_scale", -1);
  expect_rejected(sample_with("\"kv_dtype\": \"f32\"", "\"kv_dtype\": \"fp8\""), "case.kv_dtype",
                  -1);
  expect_rejected(sample_with("\"layout\": \"split\"", "\"layout\": 2"), "case.layout", -1);
  expect_rejected(sample_with("\"row_stride\": 640", "\"row_stride\": 575"), "case.row_stride", -1);
  expect_rejected(sample_with("\"draft_source\": \"cache_slots\"", "\"draft_source\": \"\""),
                  "case.draft_source", -1);
  expect_rejected(sample_with("\"mask_format\": \"qlen_only_bitpacking\"", "\"mask_format\": []"),
                  "case.mask_format", -1);
  expect_rejected(sample_with("\"mask_indptr_convention\": \"offsets_only\"",
                              "\"mask_indptr_convention\": \"CSR\""),
                  "case.mask_indptr_convention", -1);
  expect_rejected(sample_with("\"mask_word_bytes\": 1", "\"mask_word_bytes\": 3"),
                  "case.mask_word_bytes", -1);
  expect_rejected(sample_with("\"page_size\": 16", "\"page_size\": 0"), "case.page_size", -1);
  expect_rejected(sample_with("\"slot_order\": \"defragmented\"", "\"slot_order\": true"),
                  "case.slot_order", -1);
  // Padding to fewer rows than real requests (bs = 2) is impossible.
  expect_rejected(sample_with("\"graph_padded_bs\": 4", "\"graph_padded_bs\": 1"),
                  "case.graph_padded_bs", -1);
  expect_rejected(sample_with("\"poison_unused_slots\": false", "\"poison_unused_slots\": 0"),
                  "case.poison_unused_slots", -1);
  expect_rejected(sample_with("\"value_scale\": 0.1", "\"value_scale\": 1e300"), "case.value_scale",
                  -1);
  expect_rejected(sample_with("\"num_splits\": 3", "\"num_splits\": 65"), "case.num_splits", -1);
  expect_rejected(replace_value("seed", "-5"), "case.seed", -1);
  expect_rejected(sample_with(",\n    \"seed\": 18364758544493064720", ""), "case.seed", -1);
}

// The balanced plan's count: written only when set (a uniform-plan case writes the bytes it
// wrote before the field existed), read back exactly, and absent means 0, the uniform plan.
TEST(Scenario, PlanBlocksRoundTripAndDefault) {
  Scenario a = sample();
  const std::string uniform = to_json(a);
  EXPECT_EQ(uniform.find("plan_blocks"), std::string::npos) << uniform;
  EXPECT_EQ(parse_scenario(uniform).spec.plan_blocks, 0);
  for (int32_t blocks : {1, 37, kMaxPlanBlocks}) {
    a.spec.plan_blocks = blocks;
    const std::string text = to_json(a);
    EXPECT_NE(text.find("\"plan_blocks\": " + std::to_string(blocks)), std::string::npos) << text;
    const Scenario b = parse_scenario(text);
    EXPECT_EQ(b.spec.plan_blocks, blocks);
    EXPECT_EQ(b, a);
  }
  // Written as 0 by hand: the same case as without the key.
  const std::string zero = sample_with("\"num_splits\": 3", "\"num_splits\": 3,\n    \"plan_blocks\": 0");
  EXPECT_EQ(parse_scenario(zero), sample());
}

// Each bad value is one InvalidInput naming case.plan_blocks: below 0, above kMaxPlanBlocks, not
// an integer, not a number; validate_case (what save_scenario runs) names it too.
TEST(Scenario, PlanBlocksRejectedNamingTheField) {
  for (const std::string& bad :
       {std::string("-1"), std::to_string(kMaxPlanBlocks + 1), std::string("2.5"),
        std::string("\"x\"")}) {
    SCOPED_TRACE(bad);
    expect_rejected(
        sample_with("\"num_splits\": 3", "\"num_splits\": 3,\n    \"plan_blocks\": " + bad),
        "case.plan_blocks", -1);
  }
  for (int32_t bad : {-1, kMaxPlanBlocks + 1}) {
    CaseSpec c = sample().spec;
    c.plan_blocks = bad;
    try {
      validate_case(c);
      ADD_FAILURE() << "plan_blocks " << bad << " accepted";
    } catch (const InvalidInput& e) {
      EXPECT_EQ(e.field(), "case.plan_blocks") << e.what();
    }
  }
}

TEST(Scenario, BitpackingWordMustHoldTheDraftBlock) {
  // Request 0 has D = 4, so 1-byte words work; a 9-node tree does not fit in 8 bits.
  Scenario sc = sample();
  sc.spec.requests[1].parents = {-1, 0, 0, 0, 0, 0, 0, 0, 0};
  try {
    validate_case(sc.spec);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "case.mask_format");
  }
  sc.spec.mask_word_bytes = 2;
  EXPECT_NO_THROW(validate_case(sc.spec));
}

TEST(Scenario, TokenBudget) {
  Scenario sc = sample();
  sc.spec.requests.assign(8, RequestDesc{{-1}, kMaxScenarioPrefix});
  sc.spec.graph_padded_bs = 0;
  try {
    validate_case(sc.spec);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "case.requests");
  }
}

TEST(Scenario, ShippedCasesLoad) {
  auto files = list_scenarios(MLAV_SCENARIO_CASES_DIR);
  EXPECT_FALSE(files.empty()) << "no scenario files under " << MLAV_SCENARIO_CASES_DIR;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    Scenario sc = load_scenario(f);
    EXPECT_FALSE(sc.property.empty());
    // What we write is what we read.
    EXPECT_EQ(parse_scenario(to_json(sc)), sc);
  }
}

}  // namespace
}  // namespace mlaverify::scenarios

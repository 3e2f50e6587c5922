// The options of libmlaverify_c's mlav_fuzz, mlav_replay and mlav_diagnose (c_suite.h): one JSON
// object per call, read strictly. Every key must be known, every value of its exact type and in
// its range (an integer option takes an integer, not 2.5 or a string; cases as the CLI's --cases,
// 1 .. 1,000,000), and JSON null means "not given". Anything else is InvalidInput naming
// options.<key> (or the byte of a syntax error), never a silent narrowing: a seed of 2^64 or a
// case count of 2^32 + 1 would otherwise wrap. Absent options stay unset here, so the defaults
// live once, in the cli/ option structs the caller fills. fuzz/options_fuzzer.cpp fuzzes these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "props/limits.h"

namespace mlaverify::capi {

struct FuzzRequest {
  std::optional<int32_t> cases;  // 1 .. kMaxCases
  std::optional<uint64_t> seed;
  std::optional<std::vector<std::string>> properties;
  std::optional<std::string> out_dir, label, shard;  // shard "K/N": cli::parse_shard checks it
  std::optional<bool> verbose;
  bool operator==(const FuzzRequest&) const = default;
};
struct ReplayRequest {
  std::vector<std::string> paths;  // required, non-empty
  std::optional<bool> allow_skipped, check_recorded, verbose;
  std::optional<int64_t> max_memory;  // >= 1 byte
  std::optional<double> max_seconds;  // finite, > 0
  bool operator==(const ReplayRequest&) const = default;
};
struct DiagnoseRequest {
  std::optional<std::vector<std::string>> readings;
  std::optional<int64_t> max_memory;
  std::optional<double> max_seconds;
  bool operator==(const DiagnoseRequest&) const = default;
};

inline constexpr int32_t kMaxCases = props::kMaxCampaignCases;  // the CLI's --cases range

// text: a JSON object, or null / "" for {}. Throws InvalidInput only.
FuzzRequest parse_fuzz_options(const char* text);
ReplayRequest parse_replay_options(const char* text);
DiagnoseRequest parse_diagnose_options(const char* text);

// The request as an options object again (only what is set): parse(to_json(r)) == r.
nlohmann::json to_json(const FuzzRequest& r);
nlohmann::json to_json(const ReplayRequest& r);
nlohmann::json to_json(const DiagnoseRequest& r);

}  // namespace mlaverify::capi

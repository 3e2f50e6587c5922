// A fuzz campaign's size limits, one place for every front end that takes them: the CLI's
// --cases and --shard K/N, MLAV_CASES, the C API's and Python's fuzz options (capi/c_options.h),
// and the shard reports merge reads (cli/json_io.cpp). Header-only and dependency-free, so the
// CPU-only fuzz build's options reader includes it too.
#pragma once

#include <cstdint>

namespace mlaverify::props {

inline constexpr int32_t kMaxCampaignCases = 1000000;
inline constexpr int32_t kMaxShards = 1000000;

}  // namespace mlaverify::props

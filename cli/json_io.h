// The CLI's machine-readable output (--json) and the fuzz shard report files (--report, merge):
// declared here, written with nlohmann_json in json_io.cpp, the CLI's one JSON translation unit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace mlaverify::cli {

// One JSON document (and a newline) per call: {"command": ..., "exit_code": ..., ...}.
void write_json(const SelfcheckResult& result, std::ostream& out);
void write_json(std::string_view command, const CampaignReport& report, std::ostream& out);
void write_json(const ReplayResult& result, std::ostream& out);
void write_json(const BackendsResult& result, std::ostream& out);
// A command that stopped on an error: {"command", "exit_code", "error": {field, index, message}}.
void write_error_json(std::string_view command, int exit_code, const std::string& field,
                      int64_t index, const std::string& message, std::ostream& out);

// A fuzz run's report file ("format": "mlaverify-fuzz-report", version 1): the --json document of
// `fuzz`. load_report throws InvalidInput naming the JSON field (and index) and the file.
// parse_report reads the text of one (`source` names it in errors); load_report a file.
void save_report(const std::filesystem::path& path, const CampaignReport& report);
CampaignReport load_report(const std::filesystem::path& path);
CampaignReport parse_report(std::string_view text, const std::string& source);

}  // namespace mlaverify::cli

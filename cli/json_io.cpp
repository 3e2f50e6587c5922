// JSON for the CLI: --json documents and fuzz shard reports. The one CLI translation unit that
// includes nlohmann_json (slow to compile). Reports are read strictly: a missing field or a wrong
// type is an InvalidInput naming its JSON path, so merge never half-reads a shard.
#include "cli/json_io.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "mlaverify/error.h"
#include "props/properties.h"

namespace mlaverify::cli {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kReportFormat = "mlaverify-fuzz-report";
constexpr int64_t kReportVersion = 1;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

ojson campaign_json(std::string_view command, const CampaignReport& r) {
  ojson j;
  j["format"] = kReportFormat;
  j["version"] = kReportVersion;
  j["command"] = command;
  j["exit_code"] = r.exit_code;
  j["verdict"] = !r.failures.empty() ? "fail" : !r.not_verified.empty() ? "not_verified" : "pass";
  j["backend"] = r.backend;
  j["seed"] = r.seed;
  j["cases"] = r.cases;
  j["properties"] = r.properties;
  j["shard_index"] = r.shard_index;
  j["shard_count"] = r.shard_count;
  j["merged_shards"] = r.merged_shards;
  j["cases_run"] = r.cases_run;
  if (r.backend_lost) j["backend_lost"] = true;  // absent otherwise: older reports read alike
  j["seconds"] = r.seconds;
  // 64 bits as hex: JSON readers that hold numbers as doubles would round a number.
  j["case_digest"] = hex64(r.case_digest);
  ojson stats = ojson::array();
  for (const props::PropertyStats& s : r.stats) {
    stats.push_back({{"property", s.property},
                     {"passed", s.passed},
                     {"failed", s.failed},
                     {"skipped", s.skipped},
                     {"skip_reason", s.skip_reason}});
  }
  j["stats"] = std::move(stats);
  ojson failures = ojson::array();
  for (const CampaignReport::FailureSummary& f : r.failures) {
    failures.push_back({{"property", f.property},
                        {"case_index", f.case_index},
                        {"shrink_steps", f.shrink_steps},
                        {"shrink_evals", f.shrink_evals},
                        {"shrunk", f.shrunk},
                        {"detail", f.detail},
                        {"file", f.file}});
  }
  j["failures"] = std::move(failures);
  j["not_verified"] = r.not_verified;
  ojson coverage = ojson::array();
  for (const props::CoverageRow& row : r.coverage) {
    coverage.push_back({{"field", row.field},
                        {"value", row.value},
                        {"accepted", row.accepted},
                        {"cases", row.cases}});
  }
  j["coverage"] = std::move(coverage);
  j["coverage_missing"] = r.coverage_missing;
  return j;
}

// Strict field access for load_report: the JSON path in every error.
class Reader {
 public:
  explicit Reader(const std::filesystem::path& file) : file_(file.string()) {}

  [[noreturn]] void fail(const std::string& field, int64_t index, const std::string& why) const {
    throw InvalidInput(field, index, why + " (in " + file_ + ")");
  }
  const nlohmann::json& at(const nlohmann::json& obj, const std::string& path,
                           const std::string& key) const {
    if (!obj.is_object()) fail(path, -1, "not an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(path.empty() ? key : path + "." + key, -1, "missing");
    return *it;
  }
  template <typename T>
  T get(const nlohmann::json& obj, const std::string& path, const std::string& key) const {
    const nlohmann::json& v = at(obj, path, key);
    const std::string where = path.empty() ? key : path + "." + key;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) fail(where, -1, "not a string");
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) fail(where, -1, "not a number");
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
        fail(where, -1, "not an unsigned integer");
      }
    } else {
      if (!v.is_number_integer()) fail(where, -1, "not an integer");
      const int64_t x = v.get<int64_t>();
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
        fail(where, -1, "out of range");
      }
    }
    return v.get<T>();
  }
  const nlohmann::json& array(const nlohmann::json& obj, const std::string& key) const {
    const nlohmann::json& v = at(obj, "", key);
    if (!v.is_array()) fail(key, -1, "not an array");
    return v;
  }

 private:
  std::string file_;
};

}  // namespace

void write_json(const SelfcheckResult& r, std::ostream& out) {
  ojson j;
  j["command"] = "selfcheck";
  j["exit_code"] = r.exit_code;
  j["checks"] = r.checks;
  j["failed"] = r.failed;
  ojson rows = ojson::array();
  for (const SelfcheckRow& row : r.rows) {
    rows.push_back({{"preset", row.preset},
                    {"tp", row.tp},
                    {"heads", row.heads},
                    {"sm_scale", row.sm_scale},
                    {"passed", row.passed},
                    {"total", row.total},
                    {"cpu_rel_frobenius", row.worst_rel_frobenius},
                    {"cpu_max_lse_err", row.worst_lse_err}});
  }
  j["rows"] = std::move(rows);
  j["failures"] = r.failures;
  j["not_verified"] = r.not_verified;
  out << j.dump(2) << "\n";
}

void write_json(std::string_view command, const CampaignReport& r, std::ostream& out) {
  out << campaign_json(command, r).dump(2) << "\n";
}

void write_json(const ReplayResult& r, std::ostream& out) {
  ojson j;
  j["command"] = "replay";
  j["exit_code"] = r.exit_code;
  j["backend"] = r.backend;
  j["passed"] = r.passed;
  j["failed"] = r.failed;
  j["bad_input"] = r.bad_input;
  j["skipped"] = r.skipped;
  j["recorded"] = {{"reproduced", r.reproduced},
                   {"not_reproduced", r.not_reproduced},
                   {"test_build_faults", r.test_build_only}};
  ojson entries = ojson::array();
  for (const ReplayEntry& e : r.entries) {
    ojson one = {
        {"file", e.file}, {"status", e.status}, {"property", e.property}, {"detail", e.detail}};
    if (e.status == "bad_input") {
      one["field"] = e.field;
      one["index"] = e.index;
    }
    if (!e.recorded.empty()) {
      one["recorded_backend"] = e.recorded_backend;
      one["recorded"] = e.recorded;
    }
    entries.push_back(std::move(one));
  }
  j["scenarios"] = std::move(entries);
  j["not_verified"] = r.not_verified;
  out << j.dump(2) << "\n";
}

void write_json(const BackendsResult& r, std::ostream& out) {
  ojson j;
  j["command"] = "backends";
  j["exit_code"] = kExitPass;
  j["backends"] = r.backends;
  j["mutants"] = r.mutants;
  out << j.dump(2) << "\n";
}

void write_error_json(std::string_view command, int exit_code, const std::string& field,
                      int64_t index, const std::string& message, std::ostream& out) {
  ojson j;
  j["command"] = command;
  j["exit_code"] = exit_code;
  j["error"] = {{"field", field}, {"index", index}, {"message", message}};
  out << j.dump(2) << "\n";
}

void save_report(const std::filesystem::path& path, const CampaignReport& r) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw InvalidInput("report", -1, "cannot write " + tmp.string());
    f << campaign_json("fuzz", r).dump(2) << "\n";
    if (!f) throw InvalidInput("report", -1, "cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

CampaignReport load_report(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidInput("path", -1, "cannot open " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_report(buf.str(), path.string());
}

CampaignReport parse_report(std::string_view text, const std::string& source) {
  Reader rd(source);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    rd.fail("json", static_cast<int64_t>(e.byte), "malformed JSON");
  } catch (const nlohmann::json::exception& e) {
    // A number nlohmann cannot hold (1e400) is out_of_range, not a parse_error (report_fuzzer's
    // first find, fuzz/regressions/report/number_overflow).
    rd.fail("json", -1, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) rd.fail("json", -1, "not an object");
  if (rd.get<std::string>(j, "", "format") != kReportFormat) {
    rd.fail("format", -1, std::string("not \"") + kReportFormat + "\"");
  }
  if (rd.get<int64_t>(j, "", "version") != kReportVersion) {
    rd.fail("version", -1, "unsupported (this build reads version 1)");
  }
  // Every count is bounded by what `fuzz` can write (at most kMaxCampaignCases cases, shards,
  // and one stats entry per known property), so no sum below can overflow and nothing the file
  // says sizes an allocation or a loop beyond its own length.
  CampaignReport r;
  r.backend = rd.get<std::string>(j, "", "backend");
  r.seed = rd.get<uint64_t>(j, "", "seed");
  r.cases = rd.get<int32_t>(j, "", "cases");
  if (r.cases < 1 || r.cases > kMaxCampaignCases) {
    rd.fail("cases", -1, "outside [1, " + std::to_string(kMaxCampaignCases) + "]");
  }
  const nlohmann::json& props = rd.array(j, "properties");
  const std::vector<props::PropertyInfo>& known = props::all_properties();
  size_t next_known = 0;  // the selection is a subsequence of all_properties(), in its order
  for (size_t i = 0; i < props.size(); ++i) {
    if (!props[i].is_string()) rd.fail("properties", static_cast<int64_t>(i), "not a string");
    const std::string name = props[i].get<std::string>();
    while (next_known < known.size() && known[next_known].name != name) ++next_known;
    if (next_known == known.size()) {
      rd.fail("properties", static_cast<int64_t>(i),
              "'" + name + "' is not a property, or out of order or repeated");
    }
    ++next_known;
    r.properties.push_back(name);
  }
  r.shard_index = rd.get<int32_t>(j, "", "shard_index");
  r.shard_count = rd.get<int32_t>(j, "", "shard_count");
  if (r.shard_count < 1 || r.shard_count > kMaxShards) {
    rd.fail("shard_count", -1, "outside [1, " + std::to_string(kMaxShards) + "]");
  }
  if (r.shard_index < 0 || r.shard_index >= r.shard_count) {
    rd.fail("shard_index", r.shard_index, "outside [0, shard_count)");
  }
  const nlohmann::json& merged = rd.array(j, "merged_shards");
  for (size_t i = 0; i < merged.size(); ++i) {
    if (!merged[i].is_number_integer()) rd.fail("merged_shards", i, "not an integer");
    const int64_t k = merged[i].get<int64_t>();
    if (k < 0 || k >= r.shard_count || (i > 0 && k <= r.merged_shards.back())) {
      rd.fail("merged_shards", static_cast<int64_t>(i),
              "not an ascending shard index in [0, shard_count)");
    }
    r.merged_shards.push_back(static_cast<int32_t>(k));
  }
  r.cases_run = rd.get<int32_t>(j, "", "cases_run");
  if (r.cases_run < 0 || r.cases_run > r.cases) rd.fail("cases_run", -1, "outside [0, cases]");
  if (j.contains("backend_lost")) {
    const nlohmann::json& lost = rd.at(j, "", "backend_lost");
    if (!lost.is_boolean()) rd.fail("backend_lost", -1, "not true or false");
    r.backend_lost = lost.get<bool>();
  }
  r.seconds = rd.get<double>(j, "", "seconds");
  if (!(r.seconds >= 0)) rd.fail("seconds", -1, "negative");
  const std::string digest = rd.get<std::string>(j, "", "case_digest");
  size_t used = 0;
  try {
    r.case_digest = std::stoull(digest, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (digest.size() != 16 || used != digest.size()) rd.fail("case_digest", -1, "not 16 hex digits");
  const nlohmann::json& stats = rd.array(j, "stats");
  int64_t failed_runs = 0;
  for (size_t i = 0; i < stats.size(); ++i) {
    const std::string p = "stats[" + std::to_string(i) + "]";
    props::PropertyStats s;
    s.property = rd.get<std::string>(stats[i], p, "property");
    s.passed = rd.get<int32_t>(stats[i], p, "passed");
    s.failed = rd.get<int32_t>(stats[i], p, "failed");
    s.skipped = rd.get<int32_t>(stats[i], p, "skipped");
    s.skip_reason = rd.get<std::string>(stats[i], p, "skip_reason");
    if (i >= r.properties.size() || s.property != r.properties[i]) {
      rd.fail("stats", static_cast<int64_t>(i),
              "property '" + s.property + "' is not the " + "selection's at this position");
    }
    // Each case runs each property once, until the property first fails.
    if (s.passed < 0 || s.failed < 0 || s.skipped < 0 ||
        int64_t{s.passed} + s.failed + s.skipped > r.cases_run) {
      rd.fail(p, -1, "passed, failed and skipped must be >= 0 and add up to at most cases_run");
    }
    failed_runs += s.failed;
    r.stats.push_back(std::move(s));
  }
  if (r.stats.size() != r.properties.size()) {
    rd.fail("stats", -1, "one entry per selected property needed");
  }
  const nlohmann::json& failures = rd.array(j, "failures");
  for (size_t i = 0; i < failures.size(); ++i) {
    const std::string p = "failures[" + std::to_string(i) + "]";
    CampaignReport::FailureSummary f;
    f.property = rd.get<std::string>(failures[i], p, "property");
    f.case_index = rd.get<int32_t>(failures[i], p, "case_index");
    f.shrink_steps = rd.get<int32_t>(failures[i], p, "shrink_steps");
    f.shrink_evals = rd.get<int32_t>(failures[i], p, "shrink_evals");
    f.shrunk = rd.get<std::string>(failures[i], p, "shrunk");
    f.detail = rd.get<std::string>(failures[i], p, "detail");
    f.file = rd.get<std::string>(failures[i], p, "file");
    if (f.case_index < 1 || f.case_index > r.cases) {
      rd.fail(p + ".case_index", -1, "outside [1, cases]");
    }
    if (f.shrink_steps < 0 || f.shrink_evals < 0) rd.fail(p, -1, "negative shrink counts");
    r.failures.push_back(std::move(f));
  }
  if (static_cast<int64_t>(r.failures.size()) != failed_runs) {
    rd.fail("failures", -1,
            std::to_string(r.failures.size()) + " entries, but the stats count " +
                std::to_string(failed_runs) + " failed runs");
  }
  // A lost backend is recorded with the failure it was lost on (run_campaign).
  if (r.backend_lost && r.failures.empty()) rd.fail("backend_lost", -1, "true without a failure");
  // Coverage rows (reports written before they existed have none; missing is recomputed).
  if (j.contains("coverage")) {
    const nlohmann::json& rows = rd.array(j, "coverage");
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string p = "coverage[" + std::to_string(i) + "]";
      props::CoverageRow row;
      row.field = rd.get<std::string>(rows[i], p, "field");
      row.value = rd.get<std::string>(rows[i], p, "value");
      const nlohmann::json& accepted = rd.at(rows[i], p, "accepted");
      if (!accepted.is_boolean()) rd.fail(p + ".accepted", -1, "not true or false");
      row.accepted = accepted.get<bool>();
      row.cases = rd.get<int32_t>(rows[i], p, "cases");
      if (row.cases < 0 || row.cases > r.cases_run) {
        rd.fail(p + ".cases", -1, "outside [0, cases_run]");
      }
      r.coverage.push_back(std::move(row));
    }
    r.coverage_missing = props::coverage_missing(r.coverage);
  }
  // The verdict is recomputed, never trusted from the file.
  judge(r);
  return r;
}

}  // namespace mlaverify::cli

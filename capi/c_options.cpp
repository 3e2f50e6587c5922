// Strict readers of the C API's JSON options (c_options.h).
#include "capi/c_options.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include "mlaverify/error.h"

namespace mlaverify::capi {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw InvalidInput("options." + key, -1, why);
}

// The object, every key known; a syntax error names its byte.
json object_of(const char* text, std::initializer_list<const char*> known) {
  json o;
  if (text == nullptr || *text == '\0') return json::object();
  try {
    o = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InvalidInput("options", static_cast<int64_t>(e.byte), std::string("not JSON: ") + e.what());
  } catch (const json::exception& e) {  // e.g. out_of_range: a number too large for a double
    throw InvalidInput("options", -1, std::string("not JSON: ") + e.what());
  }
  if (o.is_null()) return json::object();
  if (!o.is_object()) throw InvalidInput("options", -1, std::string("not a JSON object: ") + o.type_name());
  for (auto it = o.begin(); it != o.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      bad(it.key(), "unknown option (known: " + list + ")");
    }
  }
  return o;
}

const json* given(const json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// An integer in [lo, hi]: a JSON integer (signed or unsigned), never a float or a string.
template <typename T>
std::optional<T> integer(const json& o, const char* key, T lo, T hi) {
  const json* v = given(o, key);
  if (v == nullptr) return std::nullopt;
  // Appended piecewise: g++ 12 warns (-Wrestrict, a false positive) on the chained operator+.
  std::string range = "[";
  range.append(std::to_string(lo)).append(", ").append(std::to_string(hi)).append("]");
  if (!v->is_number_integer()) bad(key, "wants an integer in " + range + ", got " + v->dump());
  if (!v->is_number_unsigned() && v->get<int64_t>() < 0) {
    const int64_t i = v->get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (i >= static_cast<int64_t>(lo)) return static_cast<T>(i);
    }
    bad(key, std::to_string(i) + " outside " + range);
  }
  const uint64_t u = v->is_number_unsigned() ? v->get<uint64_t>()
                                             : static_cast<uint64_t>(v->get<int64_t>());
  uint64_t ulo = 0;
  if constexpr (std::is_signed_v<T>) {
    ulo = lo < 0 ? 0 : static_cast<uint64_t>(lo);
  } else {
    ulo = lo;
  }
  if (u < ulo || u > static_cast<uint64_t>(hi)) bad(key, std::to_string(u) + " outside " + range);
  return static_cast<T>(u);
}

std::optional<double> positive(const json& o, const char* key) {
  const json* v = given(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) bad(key, "wants a number, got " + v->dump());
  const double d = v->get<double>();
  if (!std::isfinite(d) || !(d > 0)) bad(key, "wants a finite number > 0, got " + v->dump());
  return d;
}

std::optional<bool> boolean(const json& o, const char* key) {
  const json* v = given(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) bad(key, "wants true or false, got " + v->dump());
  return v->get<bool>();
}

std::optional<std::string> string(const json& o, const char* key) {
  const json* v = given(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) bad(key, "wants a string, got " + v->dump());
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> strings(const json& o, const char* key) {
  const json* v = given(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) bad(key, "wants an array of strings, got " + v->dump());
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string()) throw InvalidInput("options." + std::string(key), static_cast<int64_t>(i),
                                           "wants a string, got " + e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

template <typename T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

FuzzRequest parse_fuzz_options(const char* text) {
  const json o = object_of(text, {"cases", "seed", "properties", "out_dir", "label", "shard",
                                  "verbose"});
  FuzzRequest r;
  r.cases = integer<int32_t>(o, "cases", 1, kMaxCases);
  r.seed = integer<uint64_t>(o, "seed", 0, std::numeric_limits<uint64_t>::max());
  r.properties = strings(o, "properties");
  r.out_dir = string(o, "out_dir");
  r.label = string(o, "label");
  r.shard = string(o, "shard");
  r.verbose = boolean(o, "verbose");
  return r;
}

ReplayRequest parse_replay_options(const char* text) {
  const json o = object_of(text, {"paths", "allow_skipped", "check_recorded", "max_memory",
                                  "max_seconds", "verbose"});
  ReplayRequest r;
  r.paths = strings(o, "paths").value_or(std::vector<std::string>{});
  if (r.paths.empty()) bad("paths", "nothing to replay");
  r.allow_skipped = boolean(o, "allow_skipped");
  r.check_recorded = boolean(o, "check_recorded");
  r.verbose = boolean(o, "verbose");
  r.max_memory = integer<int64_t>(o, "max_memory", 1, std::numeric_limits<int64_t>::max());
  r.max_seconds = positive(o, "max_seconds");
  return r;
}

DiagnoseRequest parse_diagnose_options(const char* text) {
  const json o = object_of(text, {"readings", "max_memory", "max_seconds"});
  DiagnoseRequest r;
  r.readings = strings(o, "readings");
  r.max_memory = integer<int64_t>(o, "max_memory", 1, std::numeric_limits<int64_t>::max());
  r.max_seconds = positive(o, "max_seconds");
  return r;
}

nlohmann::json to_json(const FuzzRequest& r) {
  json j = json::object();
  put(j, "cases", r.cases);
  put(j, "seed", r.seed);
  put(j, "properties", r.properties);
  put(j, "out_dir", r.out_dir);
  put(j, "label", r.label);
  put(j, "shard", r.shard);
  put(j, "verbose", r.verbose);
  return j;
}

nlohmann::json to_json(const ReplayRequest& r) {
  json j = json::object();
  j["paths"] = r.paths;
  put(j, "allow_skipped", r.allow_skipped);
  put(j, "check_recorded", r.check_recorded);
  put(j, "verbose", r.verbose);
  put(j, "max_memory", r.max_memory);
  put(j, "max_seconds", r.max_seconds);
  return j;
}

nlohmann::json to_json(const DiagnoseRequest& r) {
  json j = json::object();
  put(j, "readings", r.readings);
  put(j, "max_memory", r.max_memory);
  put(j, "max_seconds", r.max_seconds);
  return j;
}

}  // namespace mlaverify::capi

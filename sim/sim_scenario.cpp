// The simulation scenario's JSON form (nlohmann_json stays in this translation unit) and its
// replay.
#include "sim/sim_scenario.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "mlaverify/error.h"

namespace mlaverify::sim {

namespace {

using ojson = nlohmann::ordered_json;

ojson config_json(const SimConfig& c) {
  ojson j;
  j["steps"] = c.steps;
  j["seed"] = c.seed;
  j["arrival_rate"] = c.arrival_rate;
  j["prompt_min"] = c.prompt_min;
  j["prompt_max"] = c.prompt_max;
  j["output_min"] = c.output_min;
  j["output_max"] = c.output_max;
  ojson trace = ojson::array();
  for (const Arrival& a : c.trace) trace.push_back({a.step, a.prompt_len, a.output_len});
  j["trace"] = trace;
  j["max_running"] = c.max_running;
  j["tree"] = to_string(c.tree);
  j["tree_budget"] = c.tree_budget;
  j["eagle_topk"] = c.eagle_topk;
  j["eagle_depth"] = c.eagle_depth;
  j["mtp_len"] = c.mtp_len;
  j["accept_prob"] = c.accept_prob;
  j["accept_trace"] = c.accept_trace;
  j["pool_size"] = c.pool_size;
  j["page_size"] = c.page_size;
  j["allocator"] = c.allocator == model::AllocatorKind::Paged ? "paged" : "token";
  j["need_sort"] = c.need_sort;
  j["defrag"] = to_string(c.defrag);
  j["frag_threshold"] = c.frag_threshold;
  j["defrag_every"] = c.defrag_every;
  j["graph_sizes"] = c.graph_sizes;
  j["preset"] = c.preset;
  j["tp"] = c.tp;
  j["check_every"] = c.check_every;
  j["run_every"] = c.run_every;
  j["num_splits"] = c.num_splits;
  j["fault"] = to_string(c.fault);
  j["fault_step"] = c.fault_step;
  return j;
}

const ojson& field(const ojson& obj, const std::string& path, const char* name) {
  if (!obj.contains(name)) throw InvalidInput(path + "." + name, -1, "missing");
  return obj.at(name);
}

// A number of type E (an integer or a floating type) at `where` (index: its place in an
// array, or -1): integers must be JSON integers within E's range, so no double is converted to
// an integer out of its range (undefined behaviour: sim_fuzzer's accept_trace [1e308]) and no
// integer wraps.
template <typename E>
E number(const ojson& v, const std::string& where, int64_t index) {
  if (!v.is_number()) throw InvalidInput(where, index, "must be a number");
  if constexpr (std::is_integral_v<E>) {
    if (!v.is_number_integer()) throw InvalidInput(where, index, "must be an integer");
    // nlohmann parses a non-negative integer as unsigned, a negative one as signed.
    using Lim = std::numeric_limits<E>;
    bool fits;
    if (v.is_number_unsigned()) {
      fits = v.get<uint64_t>() <= static_cast<uint64_t>(Lim::max());
    } else {
      const int64_t x = v.get<int64_t>();
      fits = std::is_signed_v<E>
                 ? x >= static_cast<int64_t>(Lim::min()) && x <= static_cast<int64_t>(Lim::max())
                 : x >= 0 && static_cast<uint64_t>(x) <= static_cast<uint64_t>(Lim::max());
    }
    if (!fits) throw InvalidInput(where, index, "out of range");
  }
  return v.get<E>();
}

template <typename T>
struct IsNumberVector : std::false_type {};
template <typename E>
struct IsNumberVector<std::vector<E>> : std::is_arithmetic<E> {};

template <typename T>
T get(const ojson& obj, const std::string& path, const char* name) {
  const ojson& v = field(obj, path, name);
  try {
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw InvalidInput(path + "." + name, -1, "must be a boolean");
    } else if constexpr (std::is_arithmetic_v<T>) {
      return number<T>(v, path + "." + name, -1);
    } else if constexpr (IsNumberVector<T>::value) {
      if (!v.is_array()) throw InvalidInput(path + "." + name, -1, "must be an array");
      T out;
      out.reserve(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        out.push_back(number<typename T::value_type>(v[i], path + "." + name, int64_t(i)));
      return out;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw InvalidInput(path + "." + name, -1, "must be a string");
    }
    return v.get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidInput(path + "." + name, -1, e.what());
  }
}

SimConfig parse_config(const ojson& j) {
  const std::string p = "config";
  if (!j.is_object()) throw InvalidInput(p, -1, "must be an object");
  static const char* kKnown[] = {
      "steps",       "seed",      "arrival_rate", "prompt_min",     "prompt_max",   "output_min",
      "output_max",  "trace",     "max_running",  "tree",           "tree_budget",  "eagle_topk",
      "eagle_depth", "mtp_len",   "accept_prob",  "accept_trace",   "pool_size",    "page_size",
      "allocator",   "need_sort", "defrag",       "frag_threshold", "defrag_every", "graph_sizes",
      "preset",      "tp",        "check_every",  "run_every",      "num_splits",   "fault",
      "fault_step"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(std::begin(kKnown), std::end(kKnown), it.key()) == std::end(kKnown)) {
      throw InvalidInput(p + "." + it.key(), -1, "unknown field");
    }
  }
  SimConfig c;
  c.steps = get<int64_t>(j, p, "steps");
  c.seed = get<uint64_t>(j, p, "seed");
  c.arrival_rate = get<double>(j, p, "arrival_rate");
  c.prompt_min = get<int64_t>(j, p, "prompt_min");
  c.prompt_max = get<int64_t>(j, p, "prompt_max");
  c.output_min = get<int64_t>(j, p, "output_min");
  c.output_max = get<int64_t>(j, p, "output_max");
  const ojson& trace = field(j, p, "trace");
  if (!trace.is_array()) throw InvalidInput(p + ".trace", -1, "must be an array");
  for (size_t k = 0; k < trace.size(); ++k) {
    const ojson& t = trace[k];
    if (!t.is_array() || t.size() != 3 || !t[0].is_number_integer() || !t[1].is_number_integer() ||
        !t[2].is_number_integer()) {
      throw InvalidInput(p + ".trace", static_cast<int64_t>(k),
                         "must be [arrival_step, prompt_len, output_len] integers");
    }
    c.trace.push_back({t[0].get<int64_t>(), t[1].get<int64_t>(), t[2].get<int64_t>()});
    if (c.trace.back().prompt_len < 1 || c.trace.back().output_len < 1 || c.trace.back().step < 0 ||
        (k > 0 && c.trace[k].step < c.trace[k - 1].step)) {
      throw InvalidInput(p + ".trace", static_cast<int64_t>(k),
                         "lengths >= 1, steps >= 0 and non-decreasing");
    }
  }
  c.max_running = get<int32_t>(j, p, "max_running");
  auto named = [&](auto parse, const char* name) {
    try {
      return parse(get<std::string>(j, p, name));
    } catch (const InvalidInput& e) {
      if (e.field().starts_with(p)) throw;
      throw InvalidInput(p + "." + name, -1, e.detail());
    }
  };
  c.tree = named(parse_tree_kind, "tree");
  c.tree_budget = get<int32_t>(j, p, "tree_budget");
  c.eagle_topk = get<int32_t>(j, p, "eagle_topk");
  c.eagle_depth = get<int32_t>(j, p, "eagle_depth");
  c.mtp_len = get<int32_t>(j, p, "mtp_len");
  c.accept_prob = get<std::vector<double>>(j, p, "accept_prob");
  c.accept_trace = get<std::vector<int32_t>>(j, p, "accept_trace");
  c.pool_size = get<int64_t>(j, p, "pool_size");
  c.page_size = get<int64_t>(j, p, "page_size");
  const std::string alloc = get<std::string>(j, p, "allocator");
  if (alloc != "token" && alloc != "paged") {
    throw InvalidInput(p + ".allocator", -1, "token or paged, got '" + alloc + "'");
  }
  c.allocator = alloc == "paged" ? model::AllocatorKind::Paged : model::AllocatorKind::Token;
  c.need_sort = get<bool>(j, p, "need_sort");
  c.defrag = named(parse_defrag_policy, "defrag");
  c.frag_threshold = get<double>(j, p, "frag_threshold");
  c.defrag_every = get<int32_t>(j, p, "defrag_every");
  c.graph_sizes = get<std::vector<int32_t>>(j, p, "graph_sizes");
  c.preset = get<std::string>(j, p, "preset");
  c.tp = get<int32_t>(j, p, "tp");
  c.check_every = get<int32_t>(j, p, "check_every");
  c.run_every = j.contains("run_every") ? get<int32_t>(j, p, "run_every") : 0;
  c.num_splits = j.contains("num_splits") ? get<int32_t>(j, p, "num_splits") : 1;
  c.fault = named(parse_fault, "fault");
  c.fault_step = get<int64_t>(j, p, "fault_step");
  try {
    validate(c);
  } catch (const InvalidInput& e) {
    throw InvalidInput(p + "." + e.field(), e.index(), e.detail());
  }
  return c;
}

}  // namespace

bool is_sim_scenario(std::string_view text) {
  try {
    const ojson j = ojson::parse(text);
    return j.is_object() && j.contains("format") && j["format"] == kSimScenarioFormat;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

std::string to_json(const SimScenario& s) {
  ojson j;
  j["format"] = kSimScenarioFormat;
  j["version"] = 1;
  j["step"] = s.step;
  j["kind"] = s.kind;
  j["detail"] = s.detail;
  j["backend"] = s.backend;
  j["config"] = config_json(s.config);
  return j.dump(2) + "\n";
}

SimScenario parse_sim_scenario(std::string_view text) {
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidInput("json", static_cast<int64_t>(e.byte), e.what());
  } catch (const nlohmann::json::exception& e) {
    // A number nlohmann cannot hold (1e400) is out_of_range, not a parse_error (sim_fuzzer,
    // fuzz/regressions/sim/number_overflow).
    throw InvalidInput("json", -1, e.what());
  }
  if (!j.is_object()) throw InvalidInput("json", -1, "a simulation scenario is an object");
  const std::string root = "scenario";
  if (get<std::string>(j, root, "format") != kSimScenarioFormat) {
    throw InvalidInput("format", -1, "not a " + std::string(kSimScenarioFormat));
  }
  if (get<int64_t>(j, root, "version") != 1) throw InvalidInput("version", -1, "must be 1");
  SimScenario s;
  s.step = get<int64_t>(j, root, "step");
  s.kind = get<std::string>(j, root, "kind");
  s.detail = get<std::string>(j, root, "detail");
  s.backend = get<std::string>(j, root, "backend");
  s.config = parse_config(field(j, root, "config"));
  if (s.step < 0 || s.step >= s.config.steps) {
    throw InvalidInput("step", -1, "must be in [0, config.steps)");
  }
  return s;
}

void save_sim_scenario(const std::filesystem::path& path, const SimScenario& s) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
    f << to_json(s);
  }
  std::filesystem::rename(tmp, path);
}

SimScenario load_sim_scenario(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidInput("path", -1, "cannot read " + path.string());
  std::ostringstream text;
  text << f.rdbuf();
  try {
    return parse_sim_scenario(text.str());
  } catch (const InvalidInput& e) {
    throw InvalidInput(e.field(), e.index(), path.string() + ": " + e.detail());
  }
}

SimConfig replay_config(const SimScenario& s, bool with_fault) {
  SimConfig c = s.config;
  c.steps = s.step + 1;
  c.check_steps = {s.step};
  c.stop_after_failure = 1;
  if (!with_fault) c.fault = PlantedFault::None;
  return c;
}

SimReplay replay(const SimScenario& s, Backend& backend, bool with_fault) {
  SimReplay r;
  r.result = simulate(replay_config(s, with_fault), backend);
  r.reproduced = !r.result.failures.empty() && r.result.failures.front().step <= s.step;
  return r;
}

}  // namespace mlaverify::sim

// The JSON form of a scenario: the one translation unit that includes nlohmann_json. Strict:
// a wrong type, unknown field or bad value is an InvalidInput naming its JSON path, never
// half-read.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mlaverify/error.h"
#include "mlaverify/json_nesting.h"
#include "mlaverify/split_plan.h"
#include "scenarios/scenario.h"

namespace mlaverify::scenarios {

namespace {

using nlohmann::json;

constexpr const char* kFormatTag = "mlaverify-scenario";
constexpr int64_t kFormatVersion = 1;
// Deeper nesting than any valid file needs (3 levels); checked before parsing so random bytes
// such as "[[[[..." cannot make the parser or json's destructor recurse without bound.
constexpr int kMaxNesting = 32;

// Duplicate keys: nlohmann keeps the last, so a file that says "prefix_len" twice would load as
// whichever came last without a word. The parser callback tracks every open object's keys and
// the path to it, and rejects a repeated key naming that path (as the field checks do).
class DuplicateKeyGuard {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        count_element();
        frames_.push_back(Frame{false, 0, {}, {}});
        break;
      case json::parse_event_t::array_start:
        count_element();
        frames_.push_back(Frame{true, 0, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          throw InvalidInput(path(), -1,
                             "duplicate key (a field may appear once; the file would otherwise "
                             "mean whichever copy a parser keeps)");
        }
        break;
      }
      case json::parse_event_t::value:
        count_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_array;
    int64_t count;  // elements seen so far (arrays)
    std::set<std::string> keys;
    std::string key;  // the current key (objects)
  };
  void count_element() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().count;
  }
  // "case.requests[1].prefix_len": the path of the current key, as the field checks name it.
  std::string path() const {
    std::string out;
    for (const Frame& f : frames_) {
      if (f.is_array) {
        out += "[" + std::to_string(f.count - 1) + "]";
      } else if (!f.key.empty()) {
        out += (out.empty() ? "" : ".") + f.key;
      }
    }
    return out;
  }
  std::vector<Frame> frames_;
};

const char* type_name(const json& j) { return j.type_name(); }

void expect_object(const json& j, const std::string& path, const std::set<std::string>& known) {
  if (!j.is_object()) {
    throw InvalidInput(path, -1, std::string("expected an object, got ") + type_name(j));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key())) {
      throw InvalidInput(path.empty() ? it.key() : path + "." + it.key(), -1,
                         "unknown field (a typo? known fields are listed in scenario.h)");
    }
  }
}

const json& member(const json& obj, const std::string& path, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    throw InvalidInput(path.empty() ? key : path + "." + key, -1, "missing");
  }
  return *it;
}

int64_t as_int(const json& j, const std::string& field, int64_t index, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw InvalidInput(field, index, "integer too large");
    }
    v = static_cast<int64_t>(u);
  } else if (j.is_number_integer()) {
    v = j.get<int64_t>();
  } else {
    throw InvalidInput(field, index, std::string("expected an integer, got ") + type_name(j));
  }
  if (v < lo || v > hi) {
    throw InvalidInput(field, index,
                       "value " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return v;
}

double as_double(const json& j, const std::string& field) {
  if (!j.is_number()) {
    throw InvalidInput(field, -1, std::string("expected a number, got ") + type_name(j));
  }
  double v = j.get<double>();
  if (!std::isfinite(v)) throw InvalidInput(field, -1, "not finite");
  return v;
}

std::string as_string(const json& j, const std::string& field) {
  if (!j.is_string()) {
    throw InvalidInput(field, -1, std::string("expected a string, got ") + type_name(j));
  }
  return j.get<std::string>();
}

bool as_bool(const json& j, const std::string& field) {
  if (!j.is_boolean()) {
    throw InvalidInput(field, -1, std::string("expected true or false, got ") + type_name(j));
  }
  return j.get<bool>();
}

// Reads an enum by its stable name (to_string) from the candidates.
template <class E, size_t N>
E as_enum(const json& j, const std::string& field, const E (&values)[N]) {
  std::string s = as_string(j, field);
  std::string known;
  for (E v : values) {
    if (to_string(v) == s) return v;
    known += (known.empty() ? "" : ", ") + std::string(to_string(v));
  }
  throw InvalidInput(field, -1, "unknown value \"" + s + "\" (known: " + known + ")");
}

constexpr DType kDTypes[] = {DType::BF16, DType::F32};
constexpr LayoutKind kLayouts[] = {LayoutKind::LatentFirst, LayoutKind::RopeFirst,
                                   LayoutKind::Split};
constexpr DraftKvSource kSources[] = {DraftKvSource::ExtendRows, DraftKvSource::CacheSlots};
constexpr MaskFormat kMasks[] = {MaskFormat::FullMask, MaskFormat::QlenOnly,
                                 MaskFormat::QlenOnlyBitpacking, MaskFormat::FlashInferPacked,
                                 MaskFormat::DraftBits};
constexpr IndptrConvention kConventions[] = {IndptrConvention::Csr, IndptrConvention::OffsetsOnly};
constexpr KvIndexing kIndexings[] = {KvIndexing::TokenI64, KvIndexing::TokenI32,
                                     KvIndexing::PageTable};
constexpr SlotOrder kSlotOrders[] = {SlotOrder::Scattered, SlotOrder::Contiguous,
                                     SlotOrder::Defragmented};

CaseSpec read_case(const json& c) {
  const std::string p = "case";
  expect_object(
      c, p,
      {"requests", "num_heads", "sm_scale", "kv_dtype", "layout", "row_stride", "draft_source",
       "mask_format", "mask_indptr_convention", "mask_word_bytes", "page_size", "slot_order",
       "graph_padded_bs", "poison_unused_slots", "value_scale", "num_splits", "seed", "q_dtype",
       "q_rope_first", "q_head_stride", "o_dtype", "o_head_stride", "k_extend_stride",
       "kv_indexing", "tail_rows", "plan_blocks"});
  CaseSpec s;
  const json& reqs = member(c, p, "requests");
  if (!reqs.is_array()) {
    throw InvalidInput("case.requests", -1,
                       std::string("expected an array, got ") + type_name(reqs));
  }
  if (reqs.empty() || reqs.size() > static_cast<size_t>(kMaxScenarioRequests)) {
    throw InvalidInput("case.requests", -1,
                       "need 1.." + std::to_string(kMaxScenarioRequests) + " requests, got " +
                           std::to_string(reqs.size()));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string rp = "case.requests[" + std::to_string(i) + "]";
    const json& r = reqs[i];
    expect_object(r, rp, {"parents", "prefix_len"});
    RequestDesc d;
    const json& par = member(r, rp, "parents");
    if (!par.is_array()) {
      throw InvalidInput(rp + ".parents", -1,
                         std::string("expected an array, got ") + type_name(par));
    }
    if (par.empty() || par.size() > static_cast<size_t>(kMaxScenarioDraft)) {
      throw InvalidInput(rp + ".parents", -1,
                         "need 1.." + std::to_string(kMaxScenarioDraft) + " nodes, got " +
                             std::to_string(par.size()));
    }
    d.parents.reserve(par.size());
    for (size_t t = 0; t < par.size(); ++t) {
      d.parents.push_back(static_cast<int32_t>(
          as_int(par[t], rp + ".parents", static_cast<int64_t>(t), -1, kMaxScenarioDraft)));
    }
    d.prefix_len =
        as_int(member(r, rp, "prefix_len"), rp + ".prefix_len", -1, 0, kMaxScenarioPrefix);
    s.requests.push_back(std::move(d));
  }
  s.num_heads =
      static_cast<int32_t>(as_int(member(c, p, "num_heads"), "case.num_heads", -1, 1, 128));
  s.sm_scale = as_double(member(c, p, "sm_scale"), "case.sm_scale");
  s.kv_dtype = as_enum(member(c, p, "kv_dtype"), "case.kv_dtype", kDTypes);
  s.layout = as_enum(member(c, p, "layout"), "case.layout", kLayouts);
  s.row_stride = as_int(member(c, p, "row_stride"), "case.row_stride", -1, kRowDim, kMaxRowStride);
  s.draft_source = as_enum(member(c, p, "draft_source"), "case.draft_source", kSources);
  s.mask_format = as_enum(member(c, p, "mask_format"), "case.mask_format", kMasks);
  s.mask_indptr_convention =
      as_enum(member(c, p, "mask_indptr_convention"), "case.mask_indptr_convention", kConventions);
  s.mask_word_bytes = static_cast<int32_t>(
      as_int(member(c, p, "mask_word_bytes"), "case.mask_word_bytes", -1, 1, 4));
  s.page_size = static_cast<int32_t>(
      as_int(member(c, p, "page_size"), "case.page_size", -1, 1, kMaxPageSize));
  s.slot_order = as_enum(member(c, p, "slot_order"), "case.slot_order", kSlotOrders);
  s.graph_padded_bs = static_cast<int32_t>(
      as_int(member(c, p, "graph_padded_bs"), "case.graph_padded_bs", -1, 0, kMaxScenarioRequests));
  s.poison_unused_slots = as_bool(member(c, p, "poison_unused_slots"), "case.poison_unused_slots");
  s.value_scale = as_double(member(c, p, "value_scale"), "case.value_scale");
  s.num_splits = static_cast<int32_t>(as_int(member(c, p, "num_splits"), "case.num_splits", -1, 1,
                                             std::numeric_limits<int32_t>::max()));
  // The seed is a full uint64: accept a JSON unsigned or a non-negative integer.
  const json& seed = member(c, p, "seed");
  if (seed.is_number_unsigned()) {
    s.seed = seed.get<uint64_t>();
  } else if (seed.is_number_integer() && seed.get<int64_t>() >= 0) {
    s.seed = static_cast<uint64_t>(seed.get<int64_t>());
  } else {
    throw InvalidInput("case.seed", -1, "expected a non-negative integer");
  }
  // The presentation fields are optional: files written before they existed keep reading.
  auto optional = [&](const char* key) -> const json* {
    auto it = c.find(key);
    return it == c.end() ? nullptr : &*it;
  };
  if (const json* v = optional("q_dtype")) s.q_dtype = as_enum(*v, "case.q_dtype", kDTypes);
  if (const json* v = optional("q_rope_first")) s.q_rope_first = as_bool(*v, "case.q_rope_first");
  if (const json* v = optional("q_head_stride")) {
    s.q_head_stride = as_int(*v, "case.q_head_stride", -1, kRowDim, kMaxRowStride);
  }
  if (const json* v = optional("o_dtype")) s.o_dtype = as_enum(*v, "case.o_dtype", kDTypes);
  if (const json* v = optional("o_head_stride")) {
    s.o_head_stride = as_int(*v, "case.o_head_stride", -1, kLatentDim, kMaxRowStride);
  }
  if (const json* v = optional("k_extend_stride")) {
    s.k_extend_stride = as_int(*v, "case.k_extend_stride", -1, kRowDim, kMaxRowStride);
  }
  if (const json* v = optional("kv_indexing")) {
    s.kv_indexing = as_enum(*v, "case.kv_indexing", kIndexings);
  }
  if (const json* v = optional("tail_rows")) {
    s.tail_rows = static_cast<int32_t>(as_int(*v, "case.tail_rows", -1, 0, 64));
  }
  // Optional too (absent: 0, the uniform plan every file before it ran).
  if (const json* v = optional("plan_blocks")) {
    s.plan_blocks = static_cast<int32_t>(as_int(*v, "case.plan_blocks", -1, 0, kMaxPlanBlocks));
  }
  // Cross-field rules (parent order, token budget, bitpacking width, padding) in one place.
  validate_case(s);
  return s;
}

}  // namespace

Scenario parse_scenario(std::string_view text) {
  if (int64_t at = json_nesting_exceeded_at(text, kMaxNesting); at >= 0) {
    throw InvalidInput("json", at, "nesting deeper than " + std::to_string(kMaxNesting));
  }
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), DuplicateKeyGuard{});
  } catch (const json::parse_error& e) {
    // nlohmann's byte count is 1-based (the last character read); the index we report is the
    // 0-based offset where parsing stopped, so "" fails at 0 and a truncated file at its length.
    int64_t at = e.byte > 0 ? static_cast<int64_t>(e.byte) - 1 : 0;
    throw InvalidInput("json", at, e.what());
  } catch (const json::exception& e) {
    // Not a syntax error but still the text's fault, e.g. a number literal beyond double range
    // ("1e999" is out_of_range.406), found by the loader fuzzer.
    throw InvalidInput("json", -1, e.what());
  }
  expect_object(doc, "", {"format", "version", "property", "backend", "note", "case"});
  if (as_string(member(doc, "", "format"), "format") != kFormatTag) {
    throw InvalidInput("format", -1, std::string("expected \"") + kFormatTag + "\"");
  }
  as_int(member(doc, "", "version"), "version", -1, kFormatVersion, kFormatVersion);
  Scenario sc;
  sc.property = as_string(member(doc, "", "property"), "property");
  sc.backend = as_string(member(doc, "", "backend"), "backend");
  if (auto it = doc.find("note"); it != doc.end()) sc.note = as_string(*it, "note");
  sc.spec = read_case(member(doc, "", "case"));
  return sc;
}

// Puts arrays that hold only numbers on one line ("parents": [-1, 0, 0, 1]), so a tree reads as
// a parent array in the file rather than one node per line. Text inside JSON strings (a note
// that quotes "trees=[-1,0]") is copied as it is.
std::string compact_number_arrays(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  bool in_string = false;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in_string) {
      if (in[i] == '\\') {
        out += in[i++];  // an escape: the next character cannot end the string
        if (i < in.size()) out += in[i];
        continue;
      }
      in_string = in[i] != '"';
    } else if (in[i] == '"') {
      in_string = true;
    } else if (in[i] == '[') {
      size_t j = i + 1;
      while (j < in.size() &&
             std::string_view("-+.eE0123456789, \n").find(in[j]) != std::string_view::npos)
        ++j;
      if (j < in.size() && in[j] == ']') {
        out += '[';
        bool pending_space = false;
        for (size_t k = i + 1; k < j; ++k) {
          char c = in[k];
          if (c == ' ' || c == '\n') continue;
          if (pending_space) out += ' ';
          out += c;
          pending_space = c == ',';
        }
        out += ']';
        i = j;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

std::string to_json(const Scenario& sc) {
  // ordered_json keeps the fields in the order a reader wants them, not alphabetical.
  using ojson = nlohmann::ordered_json;
  const CaseSpec& s = sc.spec;
  ojson reqs = ojson::array();
  for (const auto& r : s.requests) {
    ojson one;
    one["parents"] = r.parents;
    one["prefix_len"] = r.prefix_len;
    reqs.push_back(std::move(one));
  }
  ojson c;
  c["requests"] = reqs;
  c["num_heads"] = s.num_heads;
  c["sm_scale"] = s.sm_scale;
  c["kv_dtype"] = to_string(s.kv_dtype);
  c["layout"] = to_string(s.layout);
  c["row_stride"] = s.row_stride;
  c["draft_source"] = to_string(s.draft_source);
  c["mask_format"] = to_string(s.mask_format);
  c["mask_indptr_convention"] = to_string(s.mask_indptr_convention);
  c["mask_word_bytes"] = s.mask_word_bytes;
  c["page_size"] = s.page_size;
  c["slot_order"] = to_string(s.slot_order);
  c["graph_padded_bs"] = s.graph_padded_bs;
  c["poison_unused_slots"] = s.poison_unused_slots;
  c["value_scale"] = s.value_scale;
  c["num_splits"] = s.num_splits;
  c["seed"] = s.seed;
  c["q_dtype"] = to_string(s.q_dtype);
  c["q_rope_first"] = s.q_rope_first;
  c["q_head_stride"] = s.q_head_stride;
  c["o_dtype"] = to_string(s.o_dtype);
  c["o_head_stride"] = s.o_head_stride;
  c["k_extend_stride"] = s.k_extend_stride;
  c["kv_indexing"] = to_string(s.kv_indexing);
  c["tail_rows"] = s.tail_rows;
  // Only when set: a uniform-plan case writes the bytes it wrote before the field existed (the
  // shipped files, and case_identity's digests of uniform cases, stay as they were).
  if (s.plan_blocks != 0) c["plan_blocks"] = s.plan_blocks;
  ojson doc;
  doc["format"] = kFormatTag;
  doc["version"] = kFormatVersion;
  doc["property"] = sc.property;
  doc["backend"] = sc.backend;
  doc["note"] = sc.note;
  doc["case"] = std::move(c);
  // Doubles are written with 17 significant digits by nlohmann (round-trip exact).
  return compact_number_arrays(doc.dump(2)) + "\n";
}

Scenario load_scenario(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidInput("path", -1, "cannot open " + path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return parse_scenario(buf.str());
  } catch (const InvalidInput& e) {
    // Keep field and index, add the file so a failing replay names it.
    throw InvalidInput(e.field(), e.index(), e.detail() + " (in " + path.string() + ")");
  }
}

void save_scenario(const std::filesystem::path& path, const Scenario& sc) {
  validate_case(sc.spec);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InvalidInput("path", -1, "cannot write " + tmp.string());
    out << to_json(sc);
    if (!out) throw InvalidInput("path", -1, "write failed for " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

std::vector<std::filesystem::path> list_scenarios(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InvalidInput("path", -1, dir.string() + " is not a directory");
  }
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mlaverify::scenarios

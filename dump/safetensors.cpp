// The safetensors reader and writer, and the only translation unit of dump/ that includes
// nlohmann_json (the header is JSON, and so is the `parents` metadata string).
#include "dump/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "mlaverify/error.h"
#include "mlaverify/json_nesting.h"

namespace mlaverify::dump {
namespace {

using nlohmann::json;

struct DTypeName {
  StDType dtype;
  const char* name;
  int bytes;
};
constexpr DTypeName kDTypes[] = {
    {StDType::BOOL, "BOOL", 1}, {StDType::U8, "U8", 1},     {StDType::I8, "I8", 1},
    {StDType::I16, "I16", 2},   {StDType::U16, "U16", 2},   {StDType::I32, "I32", 4},
    {StDType::U32, "U32", 4},   {StDType::I64, "I64", 8},   {StDType::U64, "U64", 8},
    {StDType::F16, "F16", 2},   {StDType::BF16, "BF16", 2}, {StDType::F32, "F32", 4},
    {StDType::F64, "F64", 8},
};

// A header is a flat object of objects holding short arrays: 4 levels is all a valid one needs
// (checked on the raw text before parsing, mlaverify/json_nesting.h).
constexpr int kMaxNesting = 8;

json parse_json(std::string_view text, const std::string& field) {
  if (int64_t at = json_nesting_exceeded_at(text, kMaxNesting); at >= 0) {
    throw InvalidInput(field, -1, "JSON nested deeper than " + std::to_string(kMaxNesting) +
                                      " levels at byte " + std::to_string(at));
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InvalidInput(field, -1, "not valid JSON");
  return j;
}

// A non-negative integer of a JSON value (safetensors writes shapes and offsets as integers).
int64_t as_size(const json& v, const std::string& field, int64_t index) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw InvalidInput(field, index, "value " + std::to_string(u) + " is too large");
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if (s < 0) throw InvalidInput(field, index, "negative value " + std::to_string(s));
    return s;
  }
  throw InvalidInput(field, index, "not a non-negative integer");
}

}  // namespace

int st_dtype_bytes(StDType d) {
  for (const DTypeName& n : kDTypes) {
    if (n.dtype == d) return n.bytes;
  }
  return 0;
}

std::string_view to_string(StDType d) {
  for (const DTypeName& n : kDTypes) {
    if (n.dtype == d) return n.name;
  }
  return "?";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;  // checked against the byte range on parse: cannot overflow
  return n;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::byte> bytes, std::string file) {
  SafetensorsFile f;
  f.file_ = std::move(file);
  const std::string header_field = f.file_ + ": header";
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size < 8) {
    throw InvalidInput(header_field, -1,
                       "file of " + std::to_string(size) + " bytes has no 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int k = 7; k >= 0; --k) header_len = (header_len << 8) | std::to_integer<uint64_t>(bytes[k]);
  if (header_len > static_cast<uint64_t>(size - 8)) {
    throw InvalidInput(header_field, -1,
                       "header length " + std::to_string(header_len) + " runs past the file (" +
                           std::to_string(size - 8) + " bytes follow the length)");
  }
  if (header_len > static_cast<uint64_t>(kMaxHeaderBytes)) {
    throw InvalidInput(header_field, -1,
                       "header length " + std::to_string(header_len) + " exceeds the limit of " +
                           std::to_string(kMaxHeaderBytes) + " bytes");
  }
  f.data_start_ = 8 + static_cast<int64_t>(header_len);
  const int64_t data_bytes = size - f.data_start_;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8,
                              static_cast<size_t>(header_len));
  const json header = parse_json(text, header_field);
  if (!header.is_object()) throw InvalidInput(header_field, -1, "not a JSON object");
  if (header.size() > kMaxTensors + 1) {
    throw InvalidInput(header_field, -1,
                       std::to_string(header.size()) + " entries exceed the limit of " +
                           std::to_string(kMaxTensors) + " tensors");
  }

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InvalidInput(f.file_ + ": __metadata__", -1, "not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) {
          throw InvalidInput(f.file_ + ": __metadata__." + m.key(), -1,
                             "not a string (safetensors metadata values are strings)");
        }
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string field = f.file_ + ": " + name;
    if (!entry.is_object()) throw InvalidInput(field, -1, "tensor entry is not an object");
    for (auto k = entry.begin(); k != entry.end(); ++k) {
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets") {
        throw InvalidInput(field + "." + k.key(), -1, "unknown key in a tensor entry");
      }
    }
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
      throw InvalidInput(field + ".dtype", -1, "missing or not a string");
    }
    TensorInfo t;
    t.name = name;
    const std::string dtype = entry["dtype"].get<std::string>();
    bool known = false;
    for (const DTypeName& n : kDTypes) {
      if (dtype == n.name) {
        t.dtype = n.dtype;
        known = true;
      }
    }
    if (!known) throw InvalidInput(field + ".dtype", -1, "unknown dtype \"" + dtype + "\"");
    if (!entry.contains("shape") || !entry["shape"].is_array()) {
      throw InvalidInput(field + ".shape", -1, "missing or not an array");
    }
    const json& shape = entry["shape"];
    if (shape.size() > kMaxRank) {
      throw InvalidInput(field + ".shape", -1,
                         "rank " + std::to_string(shape.size()) + " exceeds " +
                             std::to_string(kMaxRank));
    }
    // The element count is bounded by the data section before it is multiplied out further, so
    // the product cannot overflow: every factor is checked against what the file can hold.
    int64_t numel = 1;
    bool zero = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t s = as_size(shape[d], field + ".shape", static_cast<int64_t>(d));
      t.shape.push_back(s);
      if (s == 0) zero = true;
    }
    if (!zero) {
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (t.shape[d] > data_bytes || numel > data_bytes / t.shape[d]) {
          throw InvalidInput(field + ".shape", static_cast<int64_t>(d),
                             "more elements than the file's " + std::to_string(data_bytes) +
                                 " data bytes can hold");
        }
        numel *= t.shape[d];
      }
    } else {
      numel = 0;
    }
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      throw InvalidInput(field + ".data_offsets", -1, "missing or not [begin, end]");
    }
    t.begin = as_size(entry["data_offsets"][0], field + ".data_offsets", 0);
    t.end = as_size(entry["data_offsets"][1], field + ".data_offsets", 1);
    if (t.begin > t.end) {
      throw InvalidInput(field + ".data_offsets", -1,
                         "begin " + std::to_string(t.begin) + " > end " + std::to_string(t.end));
    }
    if (t.end > data_bytes) {
      throw InvalidInput(field + ".data_offsets", 1,
                         "end " + std::to_string(t.end) + " runs past the data section (" +
                             std::to_string(data_bytes) + " bytes)");
    }
    const int64_t want = numel * st_dtype_bytes(t.dtype);  // numel <= data_bytes: fits
    if (t.end - t.begin != want) {
      throw InvalidInput(field + ".data_offsets", -1,
                         std::to_string(t.end - t.begin) + " bytes for " + std::to_string(numel) +
                             " elements of " + dtype + " (" + std::to_string(want) + " expected)");
    }
    f.tensors_.push_back(std::move(t));
  }

  // No two tensors may share bytes: a writer bug (or an edit) that aliases two tensors would
  // otherwise read as two consistent-looking tensors.
  std::vector<const TensorInfo*> by_begin;
  for (const TensorInfo& t : f.tensors_) {
    if (t.end > t.begin) by_begin.push_back(&t);
  }
  std::sort(by_begin.begin(), by_begin.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin < b->begin || (a->begin == b->begin && a->name < b->name);
  });
  for (size_t k = 1; k < by_begin.size(); ++k) {
    if (by_begin[k]->begin < by_begin[k - 1]->end) {
      throw InvalidInput(f.file_ + ": " + by_begin[k]->name + ".data_offsets", 0,
                         "bytes [" + std::to_string(by_begin[k]->begin) + ", " +
                             std::to_string(by_begin[k]->end) + ") overlap " +
                             by_begin[k - 1]->name + "'s [" +
                             std::to_string(by_begin[k - 1]->begin) + ", " +
                             std::to_string(by_begin[k - 1]->end) + ")");
    }
  }
  f.bytes_ = std::move(bytes);
  return f;
}

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path, int64_t max_bytes) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(status)) {
    throw InvalidInput(name, -1, "not a readable file");
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidInput(name, -1, "cannot read its size: " + ec.message());
  if (size > static_cast<uintmax_t>(max_bytes)) {
    throw InvalidInput(name, -1,
                       std::to_string(size) + " bytes exceed the memory budget of " +
                           std::to_string(max_bytes) + " bytes (raise it with --max-memory)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidInput(name, -1, "cannot open");
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) {
    throw InvalidInput(name, -1, "short read");
  }
  return parse(std::move(bytes), name);
}

int64_t metadata_int(const SafetensorsFile& f, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& why_needed) {
  const std::string field = f.file() + ": __metadata__." + key;
  const auto it = f.metadata().find(key);
  if (it == f.metadata().end()) throw InvalidInput(field, -1, "missing (" + why_needed + ")");
  const std::string& s = it->second;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) throw InvalidInput(field, -1, "\"" + s + "\" is not an integer");
  if (v < lo || v > hi) {
    throw InvalidInput(field, -1,
                       std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  }
  return v;
}

std::vector<TensorOut> copy_tensors(const SafetensorsFile& f) {
  std::vector<TensorOut> out;
  for (const TensorInfo& t : f.tensors()) {
    TensorOut o{t.name, t.dtype, t.shape, {}};
    o.bytes.assign(f.data(t), f.data(t) + (t.end - t.begin));
    out.push_back(std::move(o));
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorOut& t : tensors) {
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    if (static_cast<int64_t>(t.bytes.size()) != numel * st_dtype_bytes(t.dtype)) {
      throw std::runtime_error(path.string() + ": tensor " + t.name + " has " +
                               std::to_string(t.bytes.size()) + " bytes for its shape");
    }
    header[t.name] = {{"dtype", std::string(to_string(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + static_cast<int64_t>(t.bytes.size())}}};
    offset += static_cast<int64_t>(t.bytes.size());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path.string() + ": cannot open for writing");
  uint64_t len = text.size();
  char len_bytes[8];
  for (int k = 0; k < 8; ++k) len_bytes[k] = static_cast<char>((len >> (8 * k)) & 0xff);
  out.write(len_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorOut& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  }
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

std::vector<std::vector<int64_t>> parse_int_lists(std::string_view json_text,
                                                  const std::string& field, size_t max_lists,
                                                  size_t max_len) {
  const json j = parse_json(json_text, field);
  if (!j.is_array()) throw InvalidInput(field, -1, "not a JSON list of lists");
  if (j.size() > max_lists) {
    throw InvalidInput(field, -1,
                       std::to_string(j.size()) + " lists, at most " + std::to_string(max_lists));
  }
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& list = j[i];
    if (!list.is_array()) throw InvalidInput(field, static_cast<int64_t>(i), "not a list");
    if (list.size() > max_len) {
      throw InvalidInput(field, static_cast<int64_t>(i),
                         std::to_string(list.size()) + " entries, at most " +
                             std::to_string(max_len));
    }
    std::vector<int64_t> v;
    for (const json& x : list) {
      if (!x.is_number_integer()) {
        throw InvalidInput(field, static_cast<int64_t>(i), "holds a value that is not an integer");
      }
      v.push_back(x.get<int64_t>());
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string int_lists_to_json(const std::vector<std::vector<int64_t>>& lists) {
  return json(lists).dump();
}

}  // namespace mlaverify::dump

// The safetensors container (an 8-byte little-endian header length, a JSON header naming every
// tensor's dtype, shape and byte range, then the bytes): a strict reader and a plain writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mlaverify::dump {

// The element types safetensors names that a verify dump may hold. Anything else in a file is
// read (so the file is still described) but refused by whoever asks for the tensor's values.
enum class StDType : int32_t { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 };

int st_dtype_bytes(StDType d);
std::string_view to_string(StDType d);  // the header's spelling: "BF16", "I64", ...

struct TensorInfo {
  std::string name;
  StDType dtype = StDType::U8;
  std::vector<int64_t> shape;  // each >= 0
  int64_t begin = 0;           // byte offset into the data section
  int64_t end = 0;             // one past the last byte: end - begin = numel * dtype bytes
  int64_t numel() const;
};

// Limits the reader enforces so a corrupted or hostile header cannot ask for work or memory its
// file does not hold: the header itself, the tensor count and the rank.
inline constexpr int64_t kMaxHeaderBytes = int64_t{16} << 20;
inline constexpr size_t kMaxTensors = 4096;
inline constexpr size_t kMaxRank = 8;

// A parsed file: the header's tensors (by name) and metadata, and the bytes they point into.
class SafetensorsFile {
 public:
  // Parses `bytes` (the whole file). `file` only names the source in errors. Throws
  // InvalidInput(field, index, detail) with field "<file>: header" (the header length, JSON,
  // offsets, overlaps), "<file>: <tensor>.shape" and the like; a tensor's byte range must lie in
  // the data section, match its dtype and shape, and overlap no other tensor.
  static SafetensorsFile parse(std::vector<std::byte> bytes, std::string file);
  // Reads and parses a file; the size is checked against `max_bytes` before anything is read.
  static SafetensorsFile read(const std::filesystem::path& path, int64_t max_bytes);

  const std::string& file() const { return file_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const TensorInfo* find(std::string_view name) const;                 // null when absent
  // The tensor's bytes (unaligned: the data section starts wherever the header ends).
  const std::byte* data(const TensorInfo& t) const { return bytes_.data() + data_start_ + t.begin; }
  int64_t file_bytes() const { return static_cast<int64_t>(bytes_.size()); }

 private:
  std::string file_;
  std::vector<std::byte> bytes_;
  int64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: raw little-endian bytes of numel(shape) elements of dtype.
struct TensorOut {
  std::string name;
  StDType dtype = StDType::U8;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

// An integer metadata value in [lo, hi]; InvalidInput naming "<file>: __metadata__.<key>" when
// it is missing (saying why_needed), does not parse as a whole integer, or is out of range.
int64_t metadata_int(const SafetensorsFile& f, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& why_needed = "required");

// Every tensor of `f` as a writable copy, in header order: how a file is edited and rewritten.
std::vector<TensorOut> copy_tensors(const SafetensorsFile& f);

// "[64, 8, 512]": a shape as error messages print it.
std::string shape_string(const std::vector<int64_t>& shape);

// Writes a safetensors file (tensors in the given order, packed, header padded with spaces to a
// multiple of 8 as the reference writer does). Throws std::runtime_error naming the path.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata);

// A JSON list of integer lists ("[[-1, 0, 0], [-1]]", the dumps' `parents` metadata), for the
// one JSON translation unit of this library. Throws InvalidInput(field, index, ...) naming the
// list at fault; at most `max_lists` lists of at most `max_len` entries each.
std::vector<std::vector<int64_t>> parse_int_lists(std::string_view json_text,
                                                  const std::string& field, size_t max_lists,
                                                  size_t max_len);
std::string int_lists_to_json(const std::vector<std::vector<int64_t>>& lists);

}  // namespace mlaverify::dump

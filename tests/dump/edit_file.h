// Test helpers for editing safetensors files: copy a file with its tensors and metadata
// rewritten (the tests' own writer; the independent one is the Python package, tests/python).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dump/safetensors.h"

namespace mlaverify::dump::testing {

using Edit = std::function<void(std::vector<TensorOut>&, std::map<std::string, std::string>&)>;

// Writes `dst`: `src`'s tensors and metadata after `edit`.
inline void rewrite_file(const std::filesystem::path& src, const std::filesystem::path& dst,
                         const Edit& edit) {
  const SafetensorsFile f = SafetensorsFile::read(src, int64_t{1} << 30);
  std::vector<TensorOut> out = copy_tensors(f);
  std::map<std::string, std::string> meta = f.metadata();
  edit(out, meta);
  write_safetensors(dst, out, meta);
}

inline TensorOut& tensor(std::vector<TensorOut>& ts, const std::string& name) {
  for (TensorOut& t : ts) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

}  // namespace mlaverify::dump::testing

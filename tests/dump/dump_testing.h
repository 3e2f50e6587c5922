// Helpers of the dump tests: copying a safetensors file with its tensors and metadata rewritten
// (the tests' own writer; the independent one is the Python package, tests/python), and an
// InvalidInput check by the pieces its message must name.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dump/safetensors.h"
#include "mlaverify/error.h"

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

// Expects f() to throw InvalidInput whose message contains every piece of `parts` (a file name,
// a tensor, an index, a reason).
template <class F>
void expect_invalid(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
    }
  }
}

}  // namespace mlaverify::dump::testing

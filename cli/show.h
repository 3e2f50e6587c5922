// `mlaverify show FILE`: pictures of a scenario or a server dump (draft trees, the mask as the
// kernel reads it, and the per-element error heatmap) as SVG and PNG, drawn by viz/.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

namespace mlaverify::cli {

struct ShowOptions {
  std::filesystem::path input;  // a scenario (.json) or a server dump (.safetensors)
  std::filesystem::path out;    // stem: writes <out>.svg and <out>.png (default: input's stem)
  std::string backend;          // scenario: the backend whose error is drawn (default cpu)
  bool json = false;
};

// 0 when the pictures were written and every compared element is within bound, 1 when drawn
// but something fails (the picture shows where), 2 for bad input.
int show(const ShowOptions& options, std::ostream& out);

}  // namespace mlaverify::cli

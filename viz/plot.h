// Line charts for `mlaverify simulate`: panels of one series over steps each, stacked, drawn with
// Cairo to SVG and PNG (the library `show` uses). Plain data in, files out.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mlaverify::viz {

struct LinePanel {
  std::string y_label;
  std::vector<double> x;  // [n] ascending (steps)
  std::vector<double> y;  // [n]
};

struct LineChart {
  std::string title;
  std::vector<LinePanel> panels;  // drawn top to bottom, sharing the x range
};

// Axis ticks at round values: step 1, 2 or 5 x 10^k giving at most `max_ticks` intervals over
// [lo, hi]; first/last the multiples of step at or outside lo and hi (the axis is widened to
// them), labels printed with the decimals the step needs ("0.25", "1500", "2e+05").
struct Ticks {
  double first = 0, last = 1, step = 1;
  std::vector<std::string> labels;  // first, first + step, ..., last
};
Ticks nice_ticks(double lo, double hi, int max_ticks);

// Writes <stem>.svg and <stem>.png (the folder must exist). std::runtime_error naming the file
// when one cannot be written; std::invalid_argument when a panel's x and y differ in length.
void render_lines(const LineChart& chart, const std::filesystem::path& stem);

}  // namespace mlaverify::viz

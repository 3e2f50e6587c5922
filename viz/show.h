// Pictures of a verify case for `mlaverify show`: each request's draft tree, its draft-block mask
// as the kernel reads it, and the per-element error heatmap, drawn with Cairo to SVG and PNG.
// Plain data in, files out; depends only on the standard library (Cairo stays in show.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mlaverify::viz {

// One request of the batch.
struct RequestPicture {
  std::vector<int32_t> parents;  // [D] draft tree, parent[0] = -1, 0 <= parent[t] < t
  int64_t prefix_len = 0;        // P
  std::vector<uint8_t> visible;  // [D * D] row-major: draft query t sees draft column j, as the
                                 // kernel reads the mask (nonzero: visible)
  std::vector<uint8_t> expected;  // [D * D] what the tree implies (empty: not known); cells where
                                  // visible != expected are marked
  bool padded = false;            // a CUDA-graph padding row: drawn greyed
  std::string label;              // e.g. "request 2 (D=16, P=65)"; empty: "request <index>"
};

// One element marked on the heatmap (circled, numbered, and listed under it).
struct WorstCell {
  int32_t request = 0;
  int64_t token = 0;  // row of the heatmap (a batch token, as in request_begin)
  int32_t head = 0;
  int32_t column = 0;
  double error = 0;  // |o - ref|
  double bound = 0;
};

// The per-element error heatmap; tokens == 0: none is drawn.
struct ErrorPicture {
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t columns = 512;
  std::vector<float> ratio;  // [tokens, heads, columns]: |o - ref| / bound (> 1 or not finite:
                             // fails). Padded rows are drawn under a hatch; give 0 where a
                             // padded row is not compared.
  std::vector<int64_t> request_begin;  // [bs + 1] token ranges of requests (qo_indptr); empty:
                                       // no boundaries drawn
  std::vector<uint8_t> token_padded;   // [tokens] 1 for padded rows; empty: none padded
  std::vector<WorstCell> worst;        // marked on the heatmap
};

struct Picture {
  std::string title;
  std::vector<RequestPicture> requests;
  ErrorPicture errors;
  std::string caption;  // wrapped to the canvas width; '\n' starts a new line
};

// --- Colours (public so that tests and the CLI's text can name them) ---------------------------

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

inline constexpr Rgb kBackground{255, 255, 255};
inline constexpr Rgb kMaskVisible{52, 101, 164};     // a cell the kernel lets the query see
inline constexpr Rgb kMaskHidden{234, 237, 242};     // a cell it hides
inline constexpr Rgb kMaskPrefix{150, 180, 220};     // the prefix band (all visible)
inline constexpr Rgb kMaskExtra{228, 26, 28};        // kernel sees it, the tree says hidden
inline constexpr Rgb kMaskMissing{255, 153, 0};      // kernel hides it, the tree says visible
inline constexpr Rgb kPaddedVisible{150, 150, 150};  // padding requests: visible cells
inline constexpr Rgb kErrorFail{228, 26, 28};        // ratio just above 1
inline constexpr Rgb kErrorFailDeep{120, 0, 10};     // ratio >= 1000
inline constexpr Rgb kErrorNonFinite{200, 0, 200};   // ratio NaN or infinite
// The ratio colour: for 0 <= ratio <= 1 light yellow through teal to navy; above 1 (failing) red,
// from kErrorFail darkening to kErrorFailDeep at 1000 on a log scale; kErrorNonFinite for NaN and
// infinities. Negative ratios are drawn as 0.
Rgb ratio_colour(double ratio);

// --- Geometry of a rendered picture (pixels, origin top left; the SVG uses the same units) ------

struct Box {
  double x = 0, y = 0, w = 0, h = 0;
};

struct RequestLayout {
  int32_t index = 0;               // into Picture::requests
  Box panel;                       // the request's whole panel
  Box tree;                        // the node-link diagram
  std::vector<double> node_x;      // [D] node centres
  std::vector<double> node_y;      // [D]
  double node_radius = 0;
  Box prefix_band;                 // the band standing for the P prefix columns
  Box mask;                        // the D x D draft grid; cell (t, j) lies at
                                   // (mask.x + (j / mask_bin) * cell, mask.y + (t / mask_bin) * cell)
  int32_t mask_bin = 1;            // draft rows/columns per drawn cell (> 1 only for large D)
  int32_t cell = 0;                // pixels per drawn cell side
};

struct HeatmapLayout {
  bool drawn = false;
  Box box;  // token (rows, top to bottom) x (head, column) (left to right): element (t, h, c) is
            // drawn at (box.x + h * head_stride + (c / column_bin) * bin_width,
            //           box.y + (t / token_bin) * row_height), bin_width x row_height pixels
  int32_t column_bin = 1;    // columns per drawn bin (the bin shows their maximum)
  int32_t bins_per_head = 0; // ceil(columns / column_bin)
  int32_t bin_width = 1;     // pixels per bin
  int32_t head_stride = 0;   // pixels from one head to the next (its bins and a 1-pixel gap)
  int32_t token_bin = 1;     // tokens per drawn row (their maximum)
  int32_t row_height = 1;    // pixels per drawn row
  std::vector<double> worst_x, worst_y;  // [worst.size()] circle centres
};

struct Layout {
  int32_t width = 0, height = 0;       // canvas, pixels
  std::vector<RequestLayout> requests; // the requests drawn, in order (at most kMaxRequestsDrawn)
  HeatmapLayout heatmap;
};

// At most this many requests are drawn, and only as many as fit about 3000 pixels of panels; the
// rest are listed by index. Requests whose mask differs from the tree are drawn first.
inline constexpr int32_t kMaxRequestsDrawn = 16;

// The geometry render() will use. Throws std::invalid_argument naming the request or field when
// the picture disagrees with itself (a parent out of range, a mask of the wrong size, ...).
Layout layout(const Picture& picture);

// Writes <stem>.svg and <stem>.png (the folder must exist) and returns the geometry used. Throws
// std::invalid_argument as layout() does, and std::runtime_error naming the file when one cannot
// be written.
Layout render(const Picture& picture, const std::filesystem::path& stem);

}  // namespace mlaverify::viz

// Drawing for `mlaverify show` (show.h). One plan (geometry, computed with Cairo's text metrics)
// drives two surfaces: SVG and PNG. Cell grids (masks, the heatmap) are rasterised at their final
// pixel size and painted unscaled, so PNG pixels are exact and the SVG stays small.
#include "viz/show.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <numbers>
#include <string_view>

namespace mlaverify::viz {

Rgb ratio_colour(double ratio) {
  if (!std::isfinite(ratio)) return kErrorNonFinite;
  if (ratio > 1.0) {
    const double f = std::min(std::log10(ratio) / 3.0, 1.0);
    auto m = [f](uint8_t a, uint8_t b) {
      return static_cast<uint8_t>(std::lround(a + (static_cast<double>(b) - a) * f));
    };
    return {m(kErrorFail.r, kErrorFailDeep.r), m(kErrorFail.g, kErrorFailDeep.g),
            m(kErrorFail.b, kErrorFailDeep.b)};
  }
  // ColorBrewer YlGnBu, 9 classes, interpolated linearly.
  static constexpr Rgb kStops[] = {{255, 255, 217}, {237, 248, 177}, {199, 233, 180},
                                   {127, 205, 187}, {65, 182, 196},  {29, 145, 192},
                                   {34, 94, 168},   {37, 52, 148},   {8, 29, 88}};
  constexpr int kLast = static_cast<int>(std::size(kStops)) - 1;
  const double u = std::clamp(ratio, 0.0, 1.0) * kLast;
  const int i = std::min(static_cast<int>(u), kLast - 1);
  const double f = u - i;
  auto lerp = [f](uint8_t a, uint8_t b) {
    return static_cast<uint8_t>(std::lround(a + (static_cast<double>(b) - a) * f));
  };
  return {lerp(kStops[i].r, kStops[i + 1].r), lerp(kStops[i].g, kStops[i + 1].g),
          lerp(kStops[i].b, kStops[i + 1].b)};
}

namespace {

// ---- small helpers ---------------------------------------------------------------------------

constexpr double kPi = std::numbers::pi;
constexpr double kMargin = 24;
constexpr double kMinContentWidth = 900;
constexpr double kMaxContentWidth = 2400;
constexpr const char* kFont = "DejaVu Sans";

constexpr Rgb kInk{34, 34, 34};
constexpr Rgb kMuted{110, 110, 110};
constexpr Rgb kEdge{140, 140, 140};
constexpr Rgb kNodeFill{214, 228, 245};
constexpr Rgb kNodeStroke{52, 101, 164};
constexpr Rgb kPadFill{232, 232, 232};
constexpr Rgb kPadStroke{150, 150, 150};
constexpr Rgb kHatch{140, 140, 140};

Rgb mix(Rgb a, Rgb b, double f) {
  auto m = [f](uint8_t x, uint8_t y) {
    return static_cast<uint8_t>(std::lround(x + (static_cast<double>(y) - x) * f));
  };
  return {m(a.r, b.r), m(a.g, b.g), m(a.b, b.b)};
}

void set_colour(cairo_t* cr, Rgb c, double alpha = 1.0) {
  cairo_set_source_rgba(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0, alpha);
}

void set_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& s, double size, bool bold = false) {
  set_font(cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

enum class Align { Left, Centre, Right };

// Draws s with its baseline at y.
void text(cairo_t* cr, const std::string& s, double x, double y, double size, Rgb colour,
          Align align = Align::Left, bool bold = false) {
  const double w = text_width(cr, s, size, bold);
  if (align == Align::Centre) x -= w / 2;
  if (align == Align::Right) x -= w;
  set_colour(cr, colour);
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, s.c_str());
  cairo_new_path(cr);
}

// Word-wraps s to max_width; '\n' forces a break.
std::vector<std::string> wrap(cairo_t* cr, const std::string& s, double size, bool bold,
                              double max_width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs(s);
  std::string paragraph;
  while (std::getline(paragraphs, paragraph)) {
    std::istringstream words(paragraph);
    std::string word, line;
    while (words >> word) {
      const std::string candidate = line.empty() ? word : line + " " + word;
      if (!line.empty() && text_width(cr, candidate, size, bold) > max_width) {
        lines.push_back(line);
        line = word;
      } else {
        line = candidate;
      }
    }
    lines.push_back(line);
  }
  return lines;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// prefixed("h", h) trips GCC 12's -Wrestrict false positive; append instead.
std::string prefixed(const char* prefix, int64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("viz: " + what); }

// A pixel buffer painted onto either surface unscaled.
class Raster {
 public:
  Raster(int w, int h)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, std::max(w, 1), std::max(h, 1))) {
    if (cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS) {
      cairo_surface_destroy(surface_);
      throw std::runtime_error("viz: cannot allocate a " + std::to_string(w) + " x " +
                               std::to_string(h) + " raster");
    }
    cairo_surface_flush(surface_);
    data_ = cairo_image_surface_get_data(surface_);
    stride_ = cairo_image_surface_get_stride(surface_);
    w_ = std::max(w, 1);
    h_ = std::max(h, 1);
    fill(0, 0, w_, h_, kBackground);
  }
  ~Raster() { cairo_surface_destroy(surface_); }
  Raster(const Raster&) = delete;
  Raster& operator=(const Raster&) = delete;

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    auto* p = reinterpret_cast<uint32_t*>(data_ + static_cast<ptrdiff_t>(y) * stride_) + x;
    *p = 0xff000000u | (uint32_t{c.r} << 16) | (uint32_t{c.g} << 8) | c.b;
  }
  void fill(int x, int y, int w, int h, Rgb c) {
    for (int yy = y; yy < y + h; ++yy)
      for (int xx = x; xx < x + w; ++xx) set(xx, yy, c);
  }
  void paint(cairo_t* cr, double x, double y) {
    cairo_surface_mark_dirty(surface_);
    cairo_save(cr);
    cairo_set_source_surface(cr, surface_, x, y);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, x, y, w_, h_);
    cairo_fill(cr);
    cairo_restore(cr);
  }

 private:
  cairo_surface_t* surface_;
  unsigned char* data_ = nullptr;
  int stride_ = 0, w_ = 0, h_ = 0;
};

// ---- the plan --------------------------------------------------------------------------------

struct TreePlan {
  std::vector<int32_t> depth;
  int32_t max_depth = 0;
  bool numbers = false;            // node numbers inside the circles
  std::vector<uint8_t> row_wrong;  // [D] the mask row of this query differs from the tree's
  int64_t mismatches = 0;
};

struct RequestPlan {
  TreePlan tree;
  std::string label;
  std::string note;  // mismatch count, drawn in red after the label
  std::string prefix_text;
  double label_y = 0, prefix_text_y = 0;
  int32_t tick_step = 1;  // draft indices between row/column numbers
};

// One entry of the mask legend, placed by the plan (it wraps to the canvas width).
struct LegendItem {
  enum Kind { Text, Swatch, Ring } kind = Text;
  Rgb colour;
  std::string label;
  double x = 0, y = 0;
};

// The heatmap's drawn cells: per (row, bin) the maximum over its tokens and columns (NaN wins);
// a row with no real token shows its padded tokens, hatched.
struct HeatBins {
  int64_t rows = 0, bins = 0;
  std::vector<float> value;      // [rows * bins]
  std::vector<uint8_t> hatched;  // [rows]
};

HeatBins bin_errors(const ErrorPicture& e, const HeatmapLayout& H) {
  HeatBins hb;
  hb.rows = (e.tokens + H.token_bin - 1) / H.token_bin;
  hb.bins = static_cast<int64_t>(e.heads) * H.bins_per_head;
  std::vector<float> real(static_cast<size_t>(hb.rows * hb.bins), 0.f), pad(real);
  std::vector<uint8_t> has_real(static_cast<size_t>(hb.rows), 0);
  auto take = [](float& acc, float v) {
    if (std::isnan(acc)) return;
    if (std::isnan(v) || v > acc) acc = v;
  };
  for (int64_t t = 0; t < e.tokens; ++t) {
    const int64_t row = t / H.token_bin;
    const bool padded = !e.token_padded.empty() && e.token_padded[t] != 0;
    if (!padded) has_real[row] = 1;
    float* acc = (padded ? pad : real).data() + row * hb.bins;
    const float* src = e.ratio.data() + t * e.heads * static_cast<int64_t>(e.columns);
    for (int32_t h = 0; h < e.heads; ++h)
      for (int32_t c = 0; c < e.columns; ++c)
        take(acc[h * H.bins_per_head + c / H.column_bin], src[h * e.columns + c]);
  }
  hb.hatched.resize(static_cast<size_t>(hb.rows));
  for (int64_t row = 0; row < hb.rows; ++row) {
    hb.hatched[row] = !has_real[row];
    if (!has_real[row])
      std::copy_n(pad.begin() + row * hb.bins, hb.bins, real.begin() + row * hb.bins);
  }
  hb.value = std::move(real);
  return hb;
}

struct Plan {
  Layout layout;
  HeatBins heat;  // filled by render() only
  std::vector<LegendItem> legend;
  std::vector<std::string> title_lines, caption_lines, omitted_lines;
  double title_y = 0, omitted_y = 0, caption_y = 0;
  std::vector<RequestPlan> requests;  // parallel to layout.requests
  // heatmap
  double heat_heading_y = 0, heat_legend_y = 0, worst_list_y = 0;
  std::string heat_heading;
  std::vector<std::string> worst_lines;
};

constexpr double kTitleSize = 20, kTitleLine = 26;
constexpr double kLabelSize = 13;
constexpr double kSmall = 10;
constexpr double kCaptionSize = 13, kCaptionLine = 18;
constexpr double kBandWidth = 40, kRowGutter = 30, kTreeGap = 40, kColumnLabels = 16;
constexpr double kPanelGapX = 56, kPanelGapY = 28;
constexpr double kHeatGutter = 64;
constexpr double kPanelsHeight = 3000;  // about how tall the request panels may grow

void validate(const Picture& p) {
  for (size_t i = 0; i < p.requests.size(); ++i) {
    const RequestPicture& r = p.requests[i];
    const std::string who = "request " + std::to_string(i) + ": ";
    const size_t d = r.parents.size();
    if (d == 0) bad(who + "no draft tokens (parents is empty)");
    if (d > 65536) bad(who + std::to_string(d) + " draft tokens (at most 65536 are drawn)");
    if (r.parents[0] != -1) bad(who + "parent[0] is " + std::to_string(r.parents[0]) + ", not -1");
    for (size_t t = 1; t < d; ++t) {
      if (r.parents[t] < 0 || static_cast<size_t>(r.parents[t]) >= t)
        bad(who + "parent[" + std::to_string(t) + "] = " + std::to_string(r.parents[t]) +
            " is not in [0, " + std::to_string(t) + ")");
    }
    if (r.prefix_len < 0) bad(who + "prefix_len " + std::to_string(r.prefix_len) + " < 0");
    if (r.visible.size() != d * d)
      bad(who + "visible has " + std::to_string(r.visible.size()) + " entries, not D * D = " +
          std::to_string(d * d));
    if (!r.expected.empty() && r.expected.size() != d * d)
      bad(who + "expected has " + std::to_string(r.expected.size()) + " entries, not D * D = " +
          std::to_string(d * d));
  }
  const ErrorPicture& e = p.errors;
  if (e.tokens < 0) bad("errors.tokens " + std::to_string(e.tokens) + " < 0");
  if (e.tokens == 0) return;
  if (e.heads < 1) bad("errors.heads " + std::to_string(e.heads) + " < 1");
  if (e.columns < 1) bad("errors.columns " + std::to_string(e.columns) + " < 1");
  const auto want = static_cast<uint64_t>(e.tokens) * static_cast<uint64_t>(e.heads) *
                    static_cast<uint64_t>(e.columns);
  if (e.ratio.size() != want)
    bad("errors.ratio has " + std::to_string(e.ratio.size()) + " entries, not tokens * heads * " +
        "columns = " + std::to_string(want));
  if (!e.token_padded.empty() && e.token_padded.size() != static_cast<size_t>(e.tokens))
    bad("errors.token_padded has " + std::to_string(e.token_padded.size()) + " entries, not " +
        std::to_string(e.tokens));
  for (size_t i = 0; i < e.request_begin.size(); ++i) {
    const int64_t b = e.request_begin[i];
    if (b < 0 || b > e.tokens || (i > 0 && b < e.request_begin[i - 1]))
      bad("errors.request_begin[" + std::to_string(i) + "] = " + std::to_string(b) +
          " is not a nondecreasing token index in [0, " + std::to_string(e.tokens) + "]");
  }
  for (size_t i = 0; i < e.worst.size(); ++i) {
    const WorstCell& w = e.worst[i];
    if (w.token < 0 || w.token >= e.tokens || w.head < 0 || w.head >= e.heads || w.column < 0 ||
        w.column >= e.columns)
      bad("errors.worst[" + std::to_string(i) + "] (token " + std::to_string(w.token) +
          ", head " + std::to_string(w.head) + ", column " + std::to_string(w.column) +
          ") lies outside the heatmap");
  }
}

// Node-link geometry in a box at the origin: leaves take consecutive slots in depth-first order,
// a parent sits over the middle of its children.
void plan_tree(const RequestPicture& r, RequestLayout& rl, TreePlan& tp, double grid) {
  const auto d = static_cast<int32_t>(r.parents.size());
  tp.depth.assign(d, 0);
  std::vector<std::vector<int32_t>> children(d);
  for (int32_t t = 1; t < d; ++t) {
    tp.depth[t] = tp.depth[r.parents[t]] + 1;
    children[r.parents[t]].push_back(t);
    tp.max_depth = std::max(tp.max_depth, tp.depth[t]);
  }
  std::vector<double> slot(d, 0);
  int32_t leaves = 0;
  std::vector<int32_t> stack{0};
  while (!stack.empty()) {
    const int32_t t = stack.back();
    stack.pop_back();
    if (children[t].empty()) slot[t] = leaves++;
    for (auto it = children[t].rbegin(); it != children[t].rend(); ++it) stack.push_back(*it);
  }
  for (int32_t t = d - 1; t >= 0; --t)
    if (!children[t].empty()) slot[t] = (slot[children[t].front()] + slot[children[t].back()]) / 2;

  // Up to 64 nodes: numbered circles. Above: compact dots, numbered only where the mask is wrong.
  const bool compact = d > 64;
  const double s = std::min(compact ? 12.0 : 26.0, 1200.0 / leaves);
  // A compact tree is no taller than its mask grid (a long chain becomes a dense line).
  const double max_h = compact ? std::max(grid, 320.0) : 720.0;
  const double rh = std::min(compact ? 34.0 : 46.0, max_h / std::max(tp.max_depth, 1));
  const double rad = std::max(1.0, std::min({compact ? 4.0 : 10.0, 0.4 * s, 0.4 * rh}));
  tp.numbers = !compact && rad >= 6.5;
  rl.node_radius = rad;
  rl.tree.w = std::max(leaves * s, 2 * rad + 2);
  rl.tree.h = tp.max_depth * rh + 2 * rad + 2;
  rl.node_x.resize(d);
  rl.node_y.resize(d);
  for (int32_t t = 0; t < d; ++t) {
    rl.node_x[t] = leaves == 1 ? rl.tree.w / 2 : (slot[t] + 0.5) * s;
    rl.node_y[t] = rad + 1 + tp.depth[t] * rh;
  }
  tp.row_wrong.assign(d, 0);
  if (!r.expected.empty()) {
    for (int32_t t = 0; t < d; ++t)
      for (int32_t j = 0; j < d; ++j) {
        const size_t k = static_cast<size_t>(t) * d + j;
        if ((r.visible[k] != 0) != (r.expected[k] != 0)) {
          tp.row_wrong[t] = 1;
          ++tp.mismatches;
        }
      }
  }
}

void offset(Box& b, double dx, double dy) {
  b.x += dx;
  b.y += dy;
}

Plan make_plan(cairo_t* cr, const Picture& p) {
  validate(p);
  Plan plan;
  Layout& L = plan.layout;
  const ErrorPicture& e = p.errors;

  // Heatmap geometry first: it sets the content width the panels flow into.
  HeatmapLayout& H = L.heatmap;
  if (e.tokens > 0) {
    H.drawn = true;
    while (static_cast<int64_t>(e.heads) * ((e.columns + H.column_bin - 1) / H.column_bin) > 640 &&
           H.column_bin < e.columns)
      H.column_bin *= 2;
    H.bins_per_head = (e.columns + H.column_bin - 1) / H.column_bin;
    const int64_t bins = static_cast<int64_t>(e.heads) * H.bins_per_head;
    H.bin_width = static_cast<int32_t>(std::clamp<int64_t>(1024 / bins, 1, 16));
    H.token_bin = static_cast<int32_t>((e.tokens + 479) / 480);
    const int64_t rows = (e.tokens + H.token_bin - 1) / H.token_bin;
    H.row_height = static_cast<int32_t>(std::clamp<int64_t>(480 / rows, 1, 12));
    H.head_stride = H.bins_per_head * H.bin_width + (e.heads > 1 ? 1 : 0);
    H.box.w = static_cast<double>(H.head_stride) * e.heads - (e.heads > 1 ? 1 : 0);
    H.box.h = static_cast<double>(rows) * H.row_height;
  }

  // Requests: the drawn ones (mismatching requests first, then in order), each panel's geometry.
  std::vector<int32_t> order;
  std::vector<RequestPlan> rplans(p.requests.size());
  std::vector<RequestLayout> rlayouts(p.requests.size());
  for (size_t i = 0; i < p.requests.size(); ++i) {
    RequestLayout& rl = rlayouts[i];
    rl.index = static_cast<int32_t>(i);
    const auto d = static_cast<int64_t>(p.requests[i].parents.size());
    rl.mask_bin = static_cast<int32_t>((d + 511) / 512);
    const int64_t nb = (d + rl.mask_bin - 1) / rl.mask_bin;
    rl.cell = static_cast<int32_t>(std::clamp<int64_t>(512 / nb, 1, 20));
    plan_tree(p.requests[i], rl, rplans[i].tree, static_cast<double>(nb) * rl.cell);
  }
  double content_w = std::max(kMinContentWidth, H.drawn ? H.box.w + kHeatGutter + 24 : 0.0);
  for (size_t ii = 0; ii < p.requests.size(); ++ii) {
    const auto i = static_cast<int32_t>(ii);
    const RequestPicture& r = p.requests[i];
    RequestLayout& rl = rlayouts[i];
    RequestPlan& rp = rplans[i];
    const auto d = static_cast<int64_t>(r.parents.size());
    rp.label = r.label.empty() ? "request " + std::to_string(i) + " (D=" + std::to_string(d) +
                                     ", P=" + std::to_string(r.prefix_len) + ")"
                               : r.label;
    if (r.padded) rp.label += "  [CUDA-graph padding]";
    if (rp.tree.mismatches > 0)
      rp.note = std::to_string(rp.tree.mismatches) +
                (rp.tree.mismatches == 1 ? " mask cell differs" : " mask cells differ") +
                " from the tree";
    rp.prefix_text = r.prefix_len == 0
                         ? "no prefix (P = 0)"
                         : "band: P = " + std::to_string(r.prefix_len) + " prefix column" +
                               (r.prefix_len == 1 ? "" : "s") + ", all visible";
    const int64_t nb = (d + rl.mask_bin - 1) / rl.mask_bin;
    const double grid = static_cast<double>(nb) * rl.cell;
    for (rp.tick_step = 1; rp.tick_step * rl.cell / rl.mask_bin < 18.0; rp.tick_step *= 2) {
    }
    // Panel-relative positions.
    const double top = 22 + kColumnLabels;
    rl.tree.x = 0;
    rl.tree.y = top;
    for (double& y : rl.node_y) y += top;
    const double mx = rl.tree.w + kTreeGap;
    rl.prefix_band = {mx + kRowGutter, top, kBandWidth, grid};
    rl.mask = {mx + kRowGutter + kBandWidth + 6, top, grid, grid};
    rp.prefix_text_y = top + grid + 16;
    const double w =
        std::max({text_width(cr, rp.label + "  " + rp.note, kLabelSize, true),
                  rl.mask.x + grid + 4,
                  rl.prefix_band.x + text_width(cr, rp.prefix_text, kSmall + 1)});
    rl.panel = {0, 0, w, top + std::max(rl.tree.h, grid + 24)};
    content_w = std::max(content_w, w);
  }
  content_w = std::min(content_w, kMaxContentWidth);
  // The drawn requests: those with mask mismatches first, then in order, at most
  // kMaxRequestsDrawn and as many as fit about kPanelsHeight pixels of panels; drawn by index.
  {
    const double budget = content_w * kPanelsHeight;
    double area = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < p.requests.size(); ++i) {
        if ((rplans[i].tree.mismatches > 0) != (pass == 0) ||
            order.size() >= static_cast<size_t>(kMaxRequestsDrawn))
          continue;
        const Box& b = rlayouts[i].panel;
        const double a = (b.w + kPanelGapX) * (b.h + kPanelGapY);
        if (!order.empty() && area + a > budget) continue;
        area += a;
        order.push_back(static_cast<int32_t>(i));
      }
    std::sort(order.begin(), order.end());
  }

  // Vertical flow: title, legend, panels (wrapped into rows), omitted list, heatmap, caption.
  double y = kMargin;
  plan.title_lines = wrap(cr, p.title, kTitleSize, true, content_w);
  plan.title_y = y + kTitleSize;
  y += plan.title_lines.size() * kTitleLine + 6;
  if (!order.empty()) {
    using K = LegendItem::Kind;
    plan.legend = {{K::Text, kMuted, "mask (rows: draft query t, columns: draft key j):"},
                   {K::Swatch, kMaskVisible, "visible"},
                   {K::Swatch, kMaskHidden, "hidden"},
                   {K::Swatch, kMaskPrefix, "prefix (all visible)"},
                   {K::Swatch, kMaskExtra, "seen, tree says hidden"},
                   {K::Swatch, kMaskMissing, "hidden, tree says seen"},
                   {K::Swatch, kPaddedVisible, "padding request"},
                   {K::Ring, kMaskExtra, "tree node: its mask row differs"}};
    double lx = kMargin, ly = y + 12;
    for (LegendItem& item : plan.legend) {
      const double w = text_width(cr, item.label, 11) + (item.kind == K::Text ? 12 : 35);
      if (lx > kMargin && lx + w - 18 > kMargin + content_w) {
        lx = kMargin;
        ly += 18;
      }
      item.x = lx;
      item.y = ly;
      lx += w;
    }
    y = ly + 18;
  }
  double x = kMargin, row_h = 0;
  for (int32_t i : order) {
    RequestLayout& rl = rlayouts[i];
    if (x > kMargin && x + rl.panel.w > kMargin + content_w) {
      x = kMargin;
      y += row_h + kPanelGapY;
      row_h = 0;
    }
    const double dx = x, dy = y;
    offset(rl.panel, dx, dy);
    offset(rl.tree, dx, dy);
    offset(rl.prefix_band, dx, dy);
    offset(rl.mask, dx, dy);
    for (double& v : rl.node_x) v += dx;
    for (double& v : rl.node_y) v += dy;
    rplans[i].label_y = dy + 14;
    rplans[i].prefix_text_y += dy;
    x += rl.panel.w + kPanelGapX;
    row_h = std::max(row_h, rl.panel.h);
    L.requests.push_back(std::move(rl));
    plan.requests.push_back(std::move(rplans[i]));
  }
  if (!order.empty()) y += row_h + kPanelGapY;
  if (order.size() < p.requests.size()) {
    std::string s = "not drawn (room for " + std::to_string(order.size()) + " of " +
                    std::to_string(p.requests.size()) + " requests): requests";
    std::vector<uint8_t> drawn(p.requests.size(), 0);
    for (int32_t i : order) drawn[i] = 1;
    for (size_t i = 0; i < p.requests.size(); ++i)
      if (!drawn[i]) s += " " + std::to_string(i);
    plan.omitted_lines = wrap(cr, s, kLabelSize, false, content_w);
    plan.omitted_y = y + kLabelSize;
    y += plan.omitted_lines.size() * kCaptionLine + 12;
  }

  if (H.drawn) {
    plan.heat_heading = "per-element error / bound: rows = tokens";
    if (H.token_bin > 1) plan.heat_heading += " (max over " + std::to_string(H.token_bin) + ")";
    plan.heat_heading += ", columns = " + std::to_string(e.heads) + " head" +
                         (e.heads == 1 ? "" : "s") + " x " + std::to_string(e.columns) +
                         " columns";
    if (H.column_bin > 1) plan.heat_heading += " (max over " + std::to_string(H.column_bin) + ")";
    plan.heat_heading_y = y + 14;
    y += 22 + 16;  // heading, head labels
    H.box.x = kMargin + kHeatGutter;
    H.box.y = y;
    y += H.box.h + 18;
    plan.heat_legend_y = y;
    y += 50;
    const size_t listed = std::min<size_t>(e.worst.size(), 10);
    for (size_t k = 0; k < e.worst.size(); ++k) {
      const WorstCell& w = e.worst[k];
      H.worst_x.push_back(H.box.x + static_cast<double>(w.head) * H.head_stride +
                          (w.column / H.column_bin + 0.5) * H.bin_width);
      H.worst_y.push_back(H.box.y + (static_cast<double>(w.token / H.token_bin) + 0.5) *
                                        H.row_height);
      if (k < listed) {
        std::string s = std::to_string(k + 1) + ": request " + std::to_string(w.request) +
                        ", token " + std::to_string(w.token) + ", head " +
                        std::to_string(w.head) + ", column " + std::to_string(w.column) +
                        ": error " + fmt("%.3g", w.error) + ", bound " + fmt("%.3g", w.bound);
        if (w.bound > 0 && std::isfinite(w.error))
          s += " (" + fmt("%.3g", w.error / w.bound) + " x bound)";
        plan.worst_lines.push_back(s);
      }
    }
    if (e.worst.size() > listed)
      plan.worst_lines.push_back("... and " + std::to_string(e.worst.size() - listed) +
                                 " more circled");
    plan.worst_list_y = y + 12;
    y += plan.worst_lines.size() * 17 + (plan.worst_lines.empty() ? 0 : 10);
  }

  if (!p.caption.empty()) {
    plan.caption_lines = wrap(cr, p.caption, kCaptionSize, false, content_w);
    plan.caption_y = y + kCaptionSize;
    y += plan.caption_lines.size() * kCaptionLine + 4;
  }
  L.width = static_cast<int32_t>(std::ceil(kMargin * 2 + content_w));
  L.height = static_cast<int32_t>(std::ceil(y + kMargin));
  return plan;
}

// ---- drawing ---------------------------------------------------------------------------------

void draw_swatch(cairo_t* cr, double x, double y, Rgb c, const std::string& label, double& next) {
  set_colour(cr, c);
  cairo_rectangle(cr, x, y - 10, 12, 12);
  cairo_fill(cr);
  set_colour(cr, kEdge);
  cairo_set_line_width(cr, 0.6);
  cairo_rectangle(cr, x + 0.3, y - 9.7, 11.4, 11.4);
  cairo_stroke(cr);
  text(cr, label, x + 17, y, 11, kInk);
  next = x + 17 + text_width(cr, label, 11) + 18;
}

void draw_tree(cairo_t* cr, const RequestPicture& r, const RequestLayout& rl,
               const TreePlan& tp) {
  const auto d = static_cast<int32_t>(r.parents.size());
  const double rad = rl.node_radius;
  cairo_set_line_width(cr, std::clamp(rad / 6, 0.5, 1.4));
  set_colour(cr, kEdge);
  for (int32_t t = 1; t < d; ++t) {
    cairo_move_to(cr, rl.node_x[r.parents[t]], rl.node_y[r.parents[t]]);
    cairo_line_to(cr, rl.node_x[t], rl.node_y[t]);
  }
  cairo_stroke(cr);
  const Rgb fill = r.padded ? kPadFill : kNodeFill;
  const Rgb stroke = r.padded ? kPadStroke : kNodeStroke;
  for (int32_t t = 0; t < d; ++t) {
    cairo_arc(cr, rl.node_x[t], rl.node_y[t], rad, 0, 2 * kPi);
    set_colour(cr, fill);
    cairo_fill_preserve(cr);
    set_colour(cr, tp.row_wrong[t] ? kMaskExtra : stroke);
    cairo_set_line_width(cr, tp.row_wrong[t] ? std::max(1.5, rad / 3.5) : std::min(1.2, rad / 4));
    cairo_stroke(cr);
    if (!tp.numbers && (tp.row_wrong[t] || t == 0)) {
      text(cr, std::to_string(t), rl.node_x[t] + rad + 1.5, rl.node_y[t] - rad - 1, 9,
           tp.row_wrong[t] ? kMaskExtra : kInk, Align::Left, tp.row_wrong[t] != 0);
    }
    if (tp.numbers) {
      const std::string n = std::to_string(t);
      const double size = std::min(10.0, rad * (n.size() >= 3 ? 0.85 : 1.05));
      text(cr, n, rl.node_x[t], rl.node_y[t] + size * 0.36, size, r.padded ? kMuted : kInk,
           Align::Centre);
    }
  }
}

void draw_mask(cairo_t* cr, const RequestPicture& r, const RequestLayout& rl,
               const RequestPlan& rp) {
  const auto d = static_cast<int64_t>(r.parents.size());
  const int64_t k = rl.mask_bin;
  const int64_t nb = (d + k - 1) / k;
  const int c = rl.cell;
  const int gap = c >= 6 ? 1 : 0;
  Raster img(static_cast<int>(nb * c), static_cast<int>(nb * c));
  const Rgb on = r.padded ? kPaddedVisible : kMaskVisible;
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t bj = 0; bj < nb; ++bj) {
      int64_t vis = 0, extra = 0, missing = 0, n = 0;
      for (int64_t t = bi * k; t < std::min(d, (bi + 1) * k); ++t)
        for (int64_t j = bj * k; j < std::min(d, (bj + 1) * k); ++j) {
          const bool v = r.visible[t * d + j] != 0;
          ++n;
          vis += v;
          if (!r.expected.empty()) {
            const bool x = r.expected[t * d + j] != 0;
            extra += v && !x;
            missing += !v && x;
          }
        }
      const Rgb col = extra > 0     ? kMaskExtra
                      : missing > 0 ? kMaskMissing
                      : vis == 0    ? kMaskHidden
                      : vis == n    ? on
                                    : mix(kMaskHidden, on, 0.4 + 0.5 * static_cast<double>(vis) / n);
      img.fill(static_cast<int>(bj * c), static_cast<int>(bi * c), c - gap, c - gap, col);
    }
  img.paint(cr, rl.mask.x, rl.mask.y);
  // Small cells: ring each mismatching one so that it shows at a glance (at most 400 rings).
  if (c < 8 && !r.expected.empty()) {
    int rings = 0;
    cairo_set_line_width(cr, 1.4);
    for (int64_t t = 0; t < d && rings < 400; ++t)
      for (int64_t j = 0; j < d && rings < 400; ++j) {
        const bool v = r.visible[t * d + j] != 0, x = r.expected[t * d + j] != 0;
        if (v == x) continue;
        ++rings;
        cairo_new_sub_path(cr);
        cairo_arc(cr, rl.mask.x + (j / k + 0.5) * c, rl.mask.y + (t / k + 0.5) * c, c / 2.0 + 4, 0,
                  2 * kPi);
      }
    set_colour(cr, kMaskExtra);
    cairo_stroke(cr);
  }

  // Prefix band.
  const Box& b = rl.prefix_band;
  if (r.prefix_len > 0) {
    set_colour(cr, r.padded ? mix(kPaddedVisible, kBackground, 0.4) : kMaskPrefix);
    cairo_rectangle(cr, b.x, b.y, b.w, b.h - gap);
    cairo_fill(cr);
  } else {
    set_colour(cr, kEdge);
    cairo_set_line_width(cr, 1);
    const double dash[] = {3, 3};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_rectangle(cr, b.x + 0.5, b.y + 0.5, b.w - 1, b.h - 1 - gap);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  if (b.h >= 50) {
    cairo_save(cr);
    const std::string s = "P = " + std::to_string(r.prefix_len);
    const double size = std::min(12.0, b.h / std::max<double>(s.size(), 1) * 1.2);
    cairo_translate(cr, b.x + b.w / 2 + size * 0.36, b.y + b.h / 2);
    cairo_rotate(cr, -kPi / 2);
    text(cr, s, 0, 0, size, r.prefix_len > 0 ? Rgb{20, 40, 80} : kMuted, Align::Centre, true);
    cairo_restore(cr);
  }
  text(cr, rp.prefix_text, b.x, rp.prefix_text_y, kSmall + 1, kMuted);

  // Row (query) and column (draft key) numbers.
  const double per = static_cast<double>(c) / k;  // pixels per draft index
  for (int64_t i = 0; i < d; i += rp.tick_step) {
    const double centre = k == 1 ? static_cast<double>(i) * c + (c - gap) / 2.0
                                 : (static_cast<double>(i) + 0.5) * per;
    const std::string n = std::to_string(i);
    text(cr, n, b.x - 4, rl.mask.y + centre + 3.5, 9, kMuted, Align::Right);
    text(cr, n, rl.mask.x + centre, rl.mask.y - 4, 9, kMuted, Align::Centre);
  }
}

void draw_heatmap(cairo_t* cr, const Picture& p, const Plan& plan) {
  const ErrorPicture& e = p.errors;
  const HeatmapLayout& H = plan.layout.heatmap;
  const HeatBins& hb = plan.heat;
  const int64_t rows = hb.rows, bins = hb.bins;
  Raster img(static_cast<int>(H.box.w), static_cast<int>(H.box.h));
  for (int64_t row = 0; row < rows; ++row) {
    const bool hatched = hb.hatched[row] != 0;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const float v = hb.value[row * bins + bin];
      Rgb col = ratio_colour(v);
      if (hatched) col = mix(col, kBackground, 0.6);
      const int x0 = static_cast<int>((bin / H.bins_per_head) * H.head_stride +
                                      (bin % H.bins_per_head) * H.bin_width);
      const int y0 = static_cast<int>(row * H.row_height);
      for (int yy = y0; yy < y0 + H.row_height; ++yy)
        for (int xx = x0; xx < x0 + H.bin_width; ++xx)
          img.set(xx, yy, hatched && (xx + yy) % 6 < 2 ? kHatch : col);
    }
  }
  img.paint(cr, H.box.x, H.box.y);
  // Rug ticks right of the map (rows) and under it (bins) wherever an element fails, so that a
  // single failing element is found at any scale without covering its neighbours.
  bool any_bad = false;
  {
    std::vector<uint8_t> row_bad(static_cast<size_t>(rows), 0), bin_bad(static_cast<size_t>(bins), 0);
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t bin = 0; bin < bins; ++bin) {
        const float v = hb.value[row * bins + bin];
        const uint8_t bad = !std::isfinite(v) ? 2 : v > 1.0f ? 1 : 0;
        row_bad[row] = std::max(row_bad[row], bad);
        bin_bad[bin] = std::max(bin_bad[bin], bad);
        any_bad |= bad != 0;
      }
    for (int64_t row = 0; row < rows; ++row)
      if (row_bad[row]) {
        set_colour(cr, row_bad[row] == 2 ? kErrorNonFinite : kErrorFail);
        cairo_rectangle(cr, H.box.x + H.box.w + 3, H.box.y + row * H.row_height, 8,
                        std::max(H.row_height, 2));
        cairo_fill(cr);
      }
    for (int64_t bin = 0; bin < bins; ++bin)
      if (bin_bad[bin]) {
        set_colour(cr, bin_bad[bin] == 2 ? kErrorNonFinite : kErrorFail);
        cairo_rectangle(cr,
                        H.box.x + (bin / H.bins_per_head) * H.head_stride +
                            (bin % H.bins_per_head) * H.bin_width,
                        H.box.y + H.box.h + 3, std::max(H.bin_width, 2), 8);
        cairo_fill(cr);
      }
  }
  set_colour(cr, kEdge);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, H.box.x - 0.5, H.box.y - 0.5, H.box.w + 1, H.box.h + 1);
  cairo_stroke(cr);

  text(cr, plan.heat_heading, kMargin, plan.heat_heading_y, kLabelSize, kInk, Align::Left, true);
  // Head labels.
  const double head_w = H.head_stride;
  int every = 1;
  while (every * head_w < text_width(cr, prefixed("h", e.heads - 1), 9) + 6) every *= 2;
  for (int32_t h = 0; h < e.heads; h += every)
    text(cr, prefixed("h", h), H.box.x + h * head_w + (head_w - 1) / 2, H.box.y - 5, 9,
         kMuted, Align::Centre);

  // Request boundaries and labels in the gutter; across the map when rows are tall enough.
  const double per_token = static_cast<double>(H.row_height) / H.token_bin;
  for (size_t i = 0; i < e.request_begin.size(); ++i) {
    const double yb = H.box.y + e.request_begin[i] * per_token;
    set_colour(cr, kInk);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, H.box.x - 14, std::round(yb) - 0.5);
    cairo_line_to(cr, H.box.x - 1, std::round(yb) - 0.5);
    cairo_stroke(cr);
    if (H.row_height >= 4 && i > 0 && i + 1 < e.request_begin.size() &&
        e.request_begin[i] < e.tokens) {
      cairo_save(cr);
      cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
      set_colour(cr, kInk, 0.8);
      cairo_move_to(cr, H.box.x, std::round(yb) + 0.5);
      cairo_line_to(cr, H.box.x + H.box.w, std::round(yb) + 0.5);
      cairo_stroke(cr);
      cairo_restore(cr);
    }
    if (i + 1 < e.request_begin.size()) {
      const int64_t b0 = e.request_begin[i], b1 = e.request_begin[i + 1];
      if ((b1 - b0) * per_token >= 10) {
        bool all_pad = !e.token_padded.empty() && b1 > b0;
        for (int64_t t = b0; all_pad && t < b1; ++t) all_pad = e.token_padded[t] != 0;
        text(cr, prefixed(all_pad ? "pad r" : "r", static_cast<int64_t>(i)), H.box.x - 18,
             H.box.y + (b0 + b1) / 2.0 * per_token + 4, 10, all_pad ? kMuted : kInk,
             Align::Right);
      }
    }
  }
  text(cr, "token", kMargin, H.box.y - 5, 9, kMuted);

  // Worst cells: a haloed ring and a number.
  const double ring = std::max(7.0, 0.7 * std::max(H.bin_width, H.row_height) + 4);
  for (size_t k = 0; k < H.worst_x.size(); ++k) {
    const double x = H.worst_x[k], y = H.worst_y[k];
    cairo_arc(cr, x, y, ring, 0, 2 * kPi);
    set_colour(cr, kBackground);
    cairo_set_line_width(cr, 4);
    cairo_stroke_preserve(cr);
    set_colour(cr, Rgb{0, 0, 0});
    cairo_set_line_width(cr, 1.8);
    cairo_stroke(cr);
    const std::string n = std::to_string(k + 1);
    const double tx = x + ring * 0.72 + 3, ty = y - ring * 0.72 - 2;
    const double w = text_width(cr, n, 11, true);
    set_colour(cr, kBackground, 0.85);
    cairo_rectangle(cr, tx - 2, ty - 10, w + 4, 13);
    cairo_fill(cr);
    text(cr, n, tx, ty, 11, Rgb{0, 0, 0}, Align::Left, true);
  }

  // Legend: the 0..1 scale, then the failure and padding keys.
  const double ly = plan.heat_legend_y;
  const double lx = H.box.x, lw = 240;
  for (int i = 0; i < static_cast<int>(lw); ++i) {
    set_colour(cr, ratio_colour(i / (lw - 1)));
    cairo_rectangle(cr, lx + i, ly, 1.02, 12);
    cairo_fill(cr);
  }
  set_colour(cr, kEdge);
  cairo_set_line_width(cr, 0.8);
  cairo_rectangle(cr, lx, ly, lw, 12);
  cairo_stroke(cr);
  for (int i = 0; i <= 4; ++i) {
    const double tx = lx + lw * i / 4.0;
    cairo_move_to(cr, tx, ly + 12);
    cairo_line_to(cr, tx, ly + 16);
    cairo_stroke(cr);
    text(cr, fmt("%g", i / 4.0), tx, ly + 27, 10, kInk, Align::Centre);
  }
  text(cr, "|o - ref| / bound", lx + lw / 2, ly + 40, 10, kMuted, Align::Centre);
  double nx = lx + lw + 24;
  // The failing ramp: 1 to 1000 on a log scale.
  for (int i = 0; i < 60; ++i) {
    set_colour(cr, ratio_colour(std::pow(10.0, 3.0 * (i + 0.5) / 60) * 1.000001));
    cairo_rectangle(cr, nx + i, ly, 1.02, 12);
    cairo_fill(cr);
  }
  set_colour(cr, kEdge);
  cairo_set_line_width(cr, 0.8);
  cairo_rectangle(cr, nx, ly, 60, 12);
  cairo_stroke(cr);
  text(cr, ">1", nx, ly + 27, 10, kInk, Align::Centre);
  text(cr, "1000+", nx + 60, ly + 27, 10, kInk, Align::Centre);
  text(cr, "fails", nx + 66, ly + 11, 11, kInk);
  nx += 66 + text_width(cr, "fails", 11) + 18;
  draw_swatch(cr, nx, ly + 11, kErrorNonFinite, "not finite", nx);
  if (any_bad)
    text(cr, "ticks right of and under the map: the rows and columns that hold such elements",
         lx + lw + 24, ly + 42, 10, kMuted);
  // Hatched key.
  cairo_save(cr);
  cairo_rectangle(cr, nx, ly + 1, 12, 12);
  cairo_clip(cr);
  set_colour(cr, mix(ratio_colour(0), kBackground, 0.6));
  cairo_paint(cr);
  set_colour(cr, kHatch);
  cairo_set_line_width(cr, 1.4);
  for (int i = -12; i < 24; i += 6) {
    cairo_move_to(cr, nx + i, ly + 13);
    cairo_line_to(cr, nx + i + 12, ly + 1);
  }
  cairo_stroke(cr);
  cairo_restore(cr);
  text(cr, "padding rows", nx + 17, ly + 11, 11, kInk);
  if (!H.worst_x.empty()) {
    nx += 17 + text_width(cr, "padding rows", 11) + 18;
    cairo_arc(cr, nx + 6, ly + 5, 6, 0, 2 * kPi);
    set_colour(cr, Rgb{0, 0, 0});
    cairo_set_line_width(cr, 1.8);
    cairo_stroke(cr);
    text(cr, "worst elements", nx + 17, ly + 11, 11, kInk);
  }
  for (size_t k = 0; k < plan.worst_lines.size(); ++k)
    text(cr, plan.worst_lines[k], H.box.x, plan.worst_list_y + 17.0 * k, 11, kInk);
}

void draw(cairo_t* cr, const Picture& p, const Plan& plan) {
  const Layout& L = plan.layout;
  set_colour(cr, kBackground);
  cairo_paint(cr);
  for (size_t i = 0; i < plan.title_lines.size(); ++i)
    text(cr, plan.title_lines[i], kMargin, plan.title_y + i * kTitleLine, kTitleSize, kInk,
         Align::Left, true);
  for (const LegendItem& item : plan.legend) {
    double next = 0;
    switch (item.kind) {
      case LegendItem::Text: text(cr, item.label, item.x, item.y, 11, item.colour); break;
      case LegendItem::Swatch: draw_swatch(cr, item.x, item.y, item.colour, item.label, next); break;
      case LegendItem::Ring:
        cairo_arc(cr, item.x + 6, item.y - 4, 5.5, 0, 2 * kPi);
        set_colour(cr, item.colour);
        cairo_set_line_width(cr, 2);
        cairo_stroke(cr);
        text(cr, item.label, item.x + 17, item.y, 11, kInk);
        break;
    }
  }
  for (size_t k = 0; k < L.requests.size(); ++k) {
    const RequestLayout& rl = L.requests[k];
    const RequestPicture& r = p.requests[rl.index];
    const RequestPlan& rp = plan.requests[k];
    text(cr, rp.label, rl.panel.x, rp.label_y, kLabelSize, r.padded ? kMuted : kInk, Align::Left,
         true);
    if (!rp.note.empty())
      text(cr, rp.note, rl.panel.x + text_width(cr, rp.label + "  ", kLabelSize, true), rp.label_y,
           kLabelSize, kMaskExtra, Align::Left, true);
    draw_tree(cr, r, rl, rp.tree);
    draw_mask(cr, r, rl, rp);
  }
  for (size_t i = 0; i < plan.omitted_lines.size(); ++i)
    text(cr, plan.omitted_lines[i], kMargin, plan.omitted_y + i * kCaptionLine, kLabelSize, kMuted);
  if (L.heatmap.drawn) draw_heatmap(cr, p, plan);
  for (size_t i = 0; i < plan.caption_lines.size(); ++i)
    text(cr, plan.caption_lines[i], kMargin, plan.caption_y + i * kCaptionLine, kCaptionSize,
         kInk);
}

struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* c) const { cairo_destroy(c); }
};
using SurfacePtr = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using ContextPtr = std::unique_ptr<cairo_t, ContextDeleter>;

Plan plan_with_metrics(const Picture& picture) {
  SurfacePtr s(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1));
  ContextPtr cr(cairo_create(s.get()));
  return make_plan(cr.get(), picture);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

[[noreturn]] void cannot_write(const std::filesystem::path& file, const std::string& why) {
  throw std::runtime_error("viz: cannot write " + file.string() + ": " + why);
}

// Cairo draws text as glyph outlines; a <title> and <desc> keep the SVG's words searchable.
void add_svg_text(const std::filesystem::path& file, const Picture& p) {
  std::string svg;
  {
    std::ifstream in(file, std::ios::binary);
    if (!in) cannot_write(file, "cannot read it back");
    std::ostringstream ss;
    ss << in.rdbuf();
    svg = ss.str();
  }
  const size_t open = svg.find("<svg");
  const size_t end = open == std::string::npos ? open : svg.find('>', open);
  if (end == std::string::npos) cannot_write(file, "cairo wrote no <svg> element");
  // The cell grids are embedded rasters: keep their pixels sharp when the SVG is zoomed.
  const std::string meta = "\n<title>" + xml_escape(p.title) + "</title>\n<desc>" +
                           xml_escape(p.caption) +
                           "</desc>\n<style>image { image-rendering: pixelated; }</style>";
  svg.insert(end + 1, meta);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << svg;
  out.close();
  if (!out) cannot_write(file, "write failed");
}

}  // namespace

Layout layout(const Picture& picture) { return plan_with_metrics(picture).layout; }

Layout render(const Picture& picture, const std::filesystem::path& stem) {
  Plan plan = plan_with_metrics(picture);
  if (plan.layout.heatmap.drawn) plan.heat = bin_errors(picture.errors, plan.layout.heatmap);
  const Layout& L = plan.layout;
  std::filesystem::path svg = stem, png = stem;
  svg += ".svg";
  png += ".png";
  {
    SurfacePtr s(cairo_svg_surface_create(svg.c_str(), L.width, L.height));
    if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS)
      cannot_write(svg, cairo_status_to_string(cairo_surface_status(s.get())));
    cairo_svg_surface_set_document_unit(s.get(), CAIRO_SVG_UNIT_PX);  // the PNG's pixels
    {
      ContextPtr cr(cairo_create(s.get()));
      draw(cr.get(), picture, plan);
      if (cairo_status(cr.get()) != CAIRO_STATUS_SUCCESS)
        cannot_write(svg, cairo_status_to_string(cairo_status(cr.get())));
    }
    cairo_surface_finish(s.get());
    if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS)
      cannot_write(svg, cairo_status_to_string(cairo_surface_status(s.get())));
  }
  add_svg_text(svg, picture);
  {
    SurfacePtr s(cairo_image_surface_create(CAIRO_FORMAT_RGB24, L.width, L.height));
    if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS)
      cannot_write(png, cairo_status_to_string(cairo_surface_status(s.get())));
    ContextPtr cr(cairo_create(s.get()));
    draw(cr.get(), picture, plan);
    cairo_surface_flush(s.get());
    const cairo_status_t st = cairo_surface_write_to_png(s.get(), png.c_str());
    if (st != CAIRO_STATUS_SUCCESS) cannot_write(png, cairo_status_to_string(st));
  }
  return L;
}

}  // namespace mlaverify::viz

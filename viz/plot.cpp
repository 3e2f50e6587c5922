// render_lines: stacked panels with axes, tick labels and one polyline each (long series are
// reduced to each pixel column's min and max, so spikes survive).
#include "viz/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace mlaverify::viz {

namespace {

constexpr int kWidth = 1000;
constexpr int kPanelHeight = 150;
constexpr int kTop = 54;
constexpr double kLeft = 90, kRight = 20, kGap = 36;

// One tick label: `decimals` places, or %g past a million (where the step is >= 10^5).
std::string label(double v, int decimals) {
  char buf[40];
  if (std::fabs(v) >= 1e6) {
    std::snprintf(buf, sizeof buf, "%g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v == 0 ? 0.0 : v);  // no "-0"
  }
  return buf;
}

void draw(cairo_t* cr, const LineChart& chart, int height) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, 14);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_move_to(cr, kLeft, 24);
  cairo_show_text(cr, chart.title.c_str());
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  for (const LinePanel& p : chart.panels) {
    for (double x : p.x) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
    }
  }
  if (!(xmax > xmin)) {
    xmin = 0;
    xmax = std::max(1.0, xmax);
  }
  const double pw = kWidth - kLeft - kRight;
  for (size_t k = 0; k < chart.panels.size(); ++k) {
    const LinePanel& p = chart.panels[k];
    const double top = kTop + static_cast<double>(k) * (kPanelHeight + kGap);
    const double ph = kPanelHeight;
    double ymin = 0, ymax = 0;
    for (double y : p.y) {
      if (std::isfinite(y)) ymax = std::max(ymax, y), ymin = std::min(ymin, y);
    }
    // The y axis widened to round ticks (at most 5 intervals); grid lines at the ticks.
    const Ticks yt = nice_ticks(ymin, ymax, 5);
    ymin = yt.first, ymax = yt.last;
    cairo_set_line_width(cr, 1);
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    for (size_t g = 0; g < yt.labels.size(); ++g) {
      const double y = top + ph - ph * static_cast<double>(g) * yt.step / (ymax - ymin);
      cairo_move_to(cr, kLeft, y);
      cairo_line_to(cr, kLeft + pw, y);
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, kLeft, top, pw, ph);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 10);
    for (size_t g = 0; g < yt.labels.size(); ++g) {
      const std::string& s = yt.labels[g];
      cairo_text_extents_t e;
      cairo_text_extents(cr, s.c_str(), &e);
      cairo_move_to(cr, kLeft - 6 - e.width,
                    top + ph - ph * static_cast<double>(g) * yt.step / (ymax - ymin) + 3);
      cairo_show_text(cr, s.c_str());
    }
    // x ticks: the round steps inside the data's range (the x range is not widened).
    const Ticks xt = nice_ticks(xmin, xmax, 6);
    for (size_t g = 0; g < xt.labels.size(); ++g) {
      const double v = xt.first + static_cast<double>(g) * xt.step;
      if (v < xmin - 1e-9 * (xmax - xmin) || v > xmax + 1e-9 * (xmax - xmin)) continue;
      cairo_text_extents_t e;
      cairo_text_extents(cr, xt.labels[g].c_str(), &e);
      cairo_move_to(cr, kLeft + pw * (v - xmin) / (xmax - xmin) - e.width / 2, top + ph + 12);
      cairo_show_text(cr, xt.labels[g].c_str());
    }
    cairo_set_font_size(cr, 12);
    // The label sits above its panel: a full series must not hide it.
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, kLeft, top - 5);
    cairo_show_text(cr, p.y_label.c_str());
    // The series: per pixel column its min and max, joined.
    if (p.x.empty()) continue;
    const int cols = static_cast<int>(pw);
    std::vector<double> lo(static_cast<size_t>(cols) + 1, INFINITY), hi(lo.size(), -INFINITY);
    for (size_t i = 0; i < p.x.size(); ++i) {
      if (!std::isfinite(p.y[i])) continue;
      const int c = static_cast<int>((p.x[i] - xmin) / (xmax - xmin) * cols);
      const size_t ci = static_cast<size_t>(std::clamp(c, 0, cols));
      lo[ci] = std::min(lo[ci], p.y[i]);
      hi[ci] = std::max(hi[ci], p.y[i]);
    }
    auto ypix = [&](double v) { return top + ph - (v - ymin) / (ymax - ymin) * ph; };
    cairo_set_source_rgb(cr, 0.2, 0.4, 0.64);
    cairo_set_line_width(cr, 1.2);
    bool started = false;
    for (int c = 0; c <= cols; ++c) {
      if (!std::isfinite(lo[static_cast<size_t>(c)])) continue;
      const double x = kLeft + c;
      if (!started) {
        cairo_move_to(cr, x, ypix(lo[static_cast<size_t>(c)]));
        started = true;
      } else {
        cairo_line_to(cr, x, ypix(lo[static_cast<size_t>(c)]));
      }
      cairo_line_to(cr, x, ypix(hi[static_cast<size_t>(c)]));
    }
    cairo_stroke(cr);
  }
  cairo_set_font_size(cr, 11);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_move_to(cr, kLeft + pw / 2 - 15, height - 8);
  cairo_show_text(cr, "step");
}

}  // namespace

Ticks nice_ticks(double lo, double hi, int max_ticks) {
  Ticks t;
  if (!std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 1) return nice_ticks(0, 1, 4);
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  // The smallest 1/2/5 x 10^k step whose widened range has at most max_ticks intervals.
  const double raw = (hi - lo) / max_ticks;
  double unit = std::pow(10.0, std::floor(std::log10(raw)));
  for (int guard = 0; guard < 8; ++guard) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * unit;
      const double first = std::floor(lo / step + 1e-9) * step;
      const double last = std::ceil(hi / step - 1e-9) * step;
      if ((last - first) / step <= max_ticks + 1e-9) {
        t.first = first, t.last = last, t.step = step;
        const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
        const int n = static_cast<int>(std::lround((last - first) / step));
        for (int i = 0; i <= n; ++i) t.labels.push_back(label(first + i * step, decimals));
        return t;
      }
    }
    unit *= 10;
  }
  return t;  // not reached: 10 x unit >= raw always fits
}

void render_lines(const LineChart& chart, const std::filesystem::path& stem) {
  for (size_t k = 0; k < chart.panels.size(); ++k) {
    if (chart.panels[k].x.size() != chart.panels[k].y.size()) {
      throw std::invalid_argument("panel " + std::to_string(k) + ": x and y differ in length");
    }
  }
  const int height = kTop + static_cast<int>(chart.panels.size()) * (kPanelHeight + kGap) + 10;
  const std::string svg = stem.string() + ".svg", png = stem.string() + ".png";
  {
    cairo_surface_t* s = cairo_svg_surface_create(svg.c_str(), kWidth, height);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
      cairo_surface_destroy(s);
      throw std::runtime_error("cannot write " + svg);
    }
    cairo_t* cr = cairo_create(s);
    draw(cr, chart, height);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    const bool ok = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS;
    cairo_surface_destroy(s);
    if (!ok) throw std::runtime_error("cannot write " + svg);
  }
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, kWidth, height);
  cairo_t* cr = cairo_create(s);
  draw(cr, chart, height);
  cairo_destroy(cr);
  const cairo_status_t st = cairo_surface_write_to_png(s, png.c_str());
  cairo_surface_destroy(s);
  if (st != CAIRO_STATUS_SUCCESS) throw std::runtime_error("cannot write " + png);
}

}  // namespace mlaverify::viz

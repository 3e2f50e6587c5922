// viz: render synthetic pictures, read the PNG back with Cairo and probe pixels where the tree,
// the mask grid, the heatmap cells and the worst-cell rings must be; the SVG is checked as text.
#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include <unistd.h>

#include "tests/viz/pictures.h"
#include "viz/show.h"

namespace mlaverify::viz {
namespace {

namespace fs = std::filesystem;
using namespace mlaverify::viz::testing;

// A scratch folder per test, removed afterwards.
class VizTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mlav_viz_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

// The PNG read back through Cairo.
class Png {
 public:
  explicit Png(const fs::path& file)
      : s_(cairo_image_surface_create_from_png(file.c_str()), cairo_surface_destroy) {}
  bool ok() const { return cairo_surface_status(s_.get()) == CAIRO_STATUS_SUCCESS; }
  int width() const { return cairo_image_surface_get_width(s_.get()); }
  int height() const { return cairo_image_surface_get_height(s_.get()); }
  Rgb at(double x, double y) const {
    const int xi = static_cast<int>(std::floor(x)), yi = static_cast<int>(std::floor(y));
    if (xi < 0 || yi < 0 || xi >= width() || yi >= height()) {
      ADD_FAILURE() << "probe (" << x << ", " << y << ") outside the " << width() << " x "
                    << height() << " canvas";
      return {};
    }
    cairo_surface_flush(s_.get());
    const unsigned char* row =
        cairo_image_surface_get_data(s_.get()) + yi * cairo_image_surface_get_stride(s_.get());
    const uint32_t p = reinterpret_cast<const uint32_t*>(row)[xi];
    return {static_cast<uint8_t>(p >> 16), static_cast<uint8_t>(p >> 8), static_cast<uint8_t>(p)};
  }
  // Pixels in [x0, x1) x [y0, y1) that are not the background.
  int inked(double x0, double y0, double x1, double y1) const {
    int n = 0;
    for (int y = static_cast<int>(y0); y < static_cast<int>(y1); ++y)
      for (int x = static_cast<int>(x0); x < static_cast<int>(x1); ++x) n += !(at(x, y) == kBackground);
    return n;
  }

 private:
  std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> s_;
};

std::string show(Rgb c) {
  return "rgb(" + std::to_string(c.r) + ", " + std::to_string(c.g) + ", " + std::to_string(c.b) +
         ")";
}
#define EXPECT_RGB(actual, expected) EXPECT_EQ(show(actual), show(expected))

// show.cpp's tree colours (not part of the interface).
constexpr Rgb kNodeFill{214, 228, 245};
constexpr Rgb kPadFill{232, 232, 232};
constexpr Rgb kHatch{140, 140, 140};

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Centre of draft cell (t, j) of a drawn request's grid.
std::pair<double, double> cell_centre(const RequestLayout& rl, int64_t t, int64_t j) {
  return {rl.mask.x + (j / rl.mask_bin) * rl.cell + (rl.cell - 1) / 2.0,
          rl.mask.y + (t / rl.mask_bin) * rl.cell + (rl.cell - 1) / 2.0};
}

// Centre of heatmap element (token, head, column), from the layout's documented formula.
std::pair<double, double> heat_centre(const HeatmapLayout& h, int32_t heads, int64_t token,
                                      int32_t head, int32_t column) {
  const double head_stride = h.bins_per_head * h.bin_width + (heads > 1 ? 1 : 0);
  return {h.box.x + head * head_stride + (column / h.column_bin) * h.bin_width + h.bin_width / 2.0,
          h.box.y + (token / h.token_bin) * h.row_height + h.row_height / 2.0};
}

// The 16-node EAGLE request with P = 65, one leaked cell and one hidden cell, plus the heatmap.
Picture eagle_picture() {
  Picture p;
  p.title = "EAGLE draft, D=16, P=65 <one leak & one hidden cell>";
  p.requests.push_back(request(eagle16(), 65, "request 0 (D=16, P=65)"));
  RequestPicture& r = p.requests[0];
  r.visible[5 * 16 + 9] = 1;  // query 5 sees column 9: the tree says hidden
  r.visible[12 * 16 + 0] = 0;  // query 12 misses the root
  p.errors = errors_for(p.requests, 8, 7);
  ratio_at(p.errors, 5, 3, 100) = 2.5f;  // fails
  ratio_at(p.errors, 9, 6, 300) = 1.0f;  // exactly at the bound: passes
  ratio_at(p.errors, 2, 1, 40) = std::numeric_limits<float>::quiet_NaN();
  p.errors.worst.push_back({0, 5, 3, 100, 2.5e-2, 1e-2});
  p.caption = "Synthetic: mask cell (5, 9) leaks, (12, 0) is hidden; token 5 head 3 column 100 "
              "is 2.5x its bound.";
  return p;
}

TEST_F(VizTest, WritesBothFilesAtTheLayoutsSize) {
  const Picture p = eagle_picture();
  const Layout lay = render(p, dir_ / "eagle");
  ASSERT_TRUE(fs::exists(dir_ / "eagle.svg"));
  ASSERT_TRUE(fs::exists(dir_ / "eagle.png"));
  const Png png(dir_ / "eagle.png");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png.width(), lay.width);
  EXPECT_EQ(png.height(), lay.height);
  // The canvas holds its content: the grid, the heatmap, and a sane size.
  EXPECT_GE(lay.width, 900);
  EXPECT_LE(lay.width, 2500);
  EXPECT_LE(lay.height, 2500);
  ASSERT_EQ(lay.requests.size(), 1u);
  EXPECT_LE(lay.requests[0].mask.x + lay.requests[0].mask.w, lay.width);
  EXPECT_LE(lay.heatmap.box.y + lay.heatmap.box.h, lay.height);
  EXPECT_EQ(layout(p).width, lay.width);
  // The title is drawn at the top left; the margin stays background.
  EXPECT_GT(png.inked(20, 20, 300, 50), 50);
  EXPECT_EQ(png.inked(0, 0, lay.width, 8), 0);
}

TEST_F(VizTest, TreeNodesAndEdgesAreDrawn) {
  const Picture p = eagle_picture();
  const Layout lay = render(p, dir_ / "tree");
  const Png png(dir_ / "tree.png");
  const RequestLayout& rl = lay.requests[0];
  ASSERT_EQ(rl.node_x.size(), 16u);
  // Root on top, depth rows below it.
  for (size_t t = 1; t < 16; ++t) EXPECT_GT(rl.node_y[t], rl.node_y[0]);
  EXPECT_GE(rl.node_radius, 8);
  for (size_t t = 0; t < 16; ++t) {
    // Inside the disk, above the number: the node fill.
    EXPECT_RGB(png.at(rl.node_x[t], rl.node_y[t] - rl.node_radius * 0.75), kNodeFill)
        << "node " << t;
    EXPECT_GT(png.inked(rl.node_x[t] - 3, rl.node_y[t] - 4, rl.node_x[t] + 3, rl.node_y[t] + 4), 0)
        << "node " << t << " has no number";
  }
  // Edge midpoints carry ink; between the root's far children, at the root's depth, none.
  const std::vector<int32_t> parents = p.requests[0].parents;
  for (size_t t = 1; t < 16; ++t) {
    const double mx = (rl.node_x[t] + rl.node_x[parents[t]]) / 2;
    const double my = (rl.node_y[t] + rl.node_y[parents[t]]) / 2;
    EXPECT_GT(png.inked(mx - 1, my - 1, mx + 2, my + 2), 0) << "edge " << parents[t] << "-" << t;
  }
  // Nodes whose mask row is wrong (5 and 12) get a red ring.
  for (int32_t t : {5, 12}) {
    int red = 0;
    for (int a = 0; a < 32; ++a) {
      const double x = rl.node_x[t] + rl.node_radius * std::cos(a * std::numbers::pi / 16);
      const double y = rl.node_y[t] + rl.node_radius * std::sin(a * std::numbers::pi / 16);
      const Rgb c = png.at(x, y);
      red += c.r > 180 && c.g < 110 && c.b < 110;
    }
    EXPECT_GT(red, 8) << "node " << t;
  }
}

TEST_F(VizTest, MaskGridShowsVisibleHiddenPrefixAndMismatches) {
  const Picture p = eagle_picture();
  const Layout lay = render(p, dir_ / "mask");
  const Png png(dir_ / "mask.png");
  const RequestLayout& rl = lay.requests[0];
  EXPECT_EQ(rl.mask_bin, 1);
  EXPECT_EQ(rl.mask.w, 16.0 * rl.cell);
  const RequestPicture& r = p.requests[0];
  for (int64_t t = 0; t < 16; ++t)
    for (int64_t j = 0; j < 16; ++j) {
      const bool v = r.visible[t * 16 + j] != 0, x = r.expected[t * 16 + j] != 0;
      const Rgb want = v && !x ? kMaskExtra : !v && x ? kMaskMissing : v ? kMaskVisible : kMaskHidden;
      auto [cx, cy] = cell_centre(rl, t, j);
      EXPECT_RGB(png.at(cx, cy), want) << "cell (" << t << ", " << j << ")";
    }
  // The prefix band: filled (P > 0), left of the grid, as tall as it, labelled.
  EXPECT_LT(rl.prefix_band.x + rl.prefix_band.w, rl.mask.x);
  EXPECT_EQ(rl.prefix_band.h, rl.mask.h);
  EXPECT_RGB(png.at(rl.prefix_band.x + 3, rl.prefix_band.y + 3), kMaskPrefix);
  // "P = 65" runs vertically through the band's middle.
  EXPECT_GT(png.inked(rl.prefix_band.x + 12, rl.prefix_band.y + rl.prefix_band.h / 2 - 10,
                      rl.prefix_band.x + 28, rl.prefix_band.y + rl.prefix_band.h / 2 + 10) -
                0,
            0);
  int dark = 0;
  for (double y = rl.prefix_band.y; y < rl.prefix_band.y + rl.prefix_band.h; ++y)
    for (double x = rl.prefix_band.x; x < rl.prefix_band.x + rl.prefix_band.w; ++x)
      dark += png.at(x, y).r < 100;
  EXPECT_GT(dark, 20) << "no label in the prefix band";
}

TEST_F(VizTest, FailingCellGetsTheFailureColourAtItsPosition) {
  const Picture p = eagle_picture();
  const Layout lay = render(p, dir_ / "heat");
  const Png png(dir_ / "heat.png");
  const HeatmapLayout& h = lay.heatmap;
  ASSERT_TRUE(h.drawn);
  EXPECT_EQ(h.column_bin, 8);
  EXPECT_EQ(h.bins_per_head, 64);
  EXPECT_EQ(h.token_bin, 1);
  EXPECT_GE(h.row_height, 4);
  EXPECT_EQ(h.head_stride, 64 * h.bin_width + 1);
  // The failing element, and only its bin, is the failure colour.
  auto [fx, fy] = heat_centre(h, 8, 5, 3, 100);
  EXPECT_RGB(png.at(fx, fy), ratio_colour(2.5));
  const Rgb fail = png.at(fx, fy);
  EXPECT_TRUE(fail.r > 180 && fail.g < 60 && fail.b < 60) << show(fail) << " is not a failure red";
  for (auto [t, hd, c] : {std::tuple{4, 3, 100}, {6, 3, 100}, {5, 2, 100}, {5, 4, 100}, {5, 3, 92},
                          {5, 3, 108}}) {
    auto [x, y] = heat_centre(h, 8, t, hd, c);
    const Rgb got = png.at(x, y);
    EXPECT_FALSE(got.r > 100 && got.g < 60 && got.b < 60) << t << " " << hd << " " << c << ": "
                                                          << show(got);
  }
  // Exactly at the bound passes: the top of the scale, not the failure colour.
  auto [bx, by] = heat_centre(h, 8, 9, 6, 300);
  EXPECT_RGB(png.at(bx, by), ratio_colour(1.0));
  EXPECT_NE(show(ratio_colour(1.0)), show(kErrorFail));
  EXPECT_GT(ratio_colour(1.0).b, 60);
  // NaN: its own colour.
  auto [nx, ny] = heat_centre(h, 8, 2, 1, 40);
  EXPECT_RGB(png.at(nx, ny), kErrorNonFinite);
  // A passing bin shows the maximum of its 8 columns on the 0..1 scale.
  float m = 0;
  for (int c = 16; c < 24; ++c) m = std::max(m, ratio_at(const_cast<ErrorPicture&>(p.errors), 11, 0, c));
  auto [px, py] = heat_centre(h, 8, 11, 0, 16);
  EXPECT_RGB(png.at(px, py), ratio_colour(m));
  // The worst cell is circled: dark pixels on a ring around it, and its number.
  ASSERT_EQ(h.worst_x.size(), 1u);
  EXPECT_DOUBLE_EQ(h.worst_x[0], fx);
  EXPECT_DOUBLE_EQ(h.worst_y[0], fy);
  int ring = 0;
  for (int a = 0; a < 36; ++a) {
    const double rr = std::max(7.0, 0.7 * std::max(h.bin_width, h.row_height) + 4);
    const Rgb c = png.at(fx + rr * std::cos(a * std::numbers::pi / 18), fy + rr * std::sin(a * std::numbers::pi / 18));
    ring += c.r < 90 && c.g < 90 && c.b < 90;
  }
  EXPECT_GT(ring, 24);
}

TEST(VizColours, ScaleRunsLightToDarkAndFailuresStandApart) {
  auto lum = [](Rgb c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b; };
  double last = 1e9;
  for (int i = 0; i <= 20; ++i) {
    const Rgb c = ratio_colour(i / 20.0);
    EXPECT_LT(lum(c), last) << i;
    last = lum(c);
    EXPECT_FALSE(c.r > 100 && c.g < 60 && c.b < 60) << i << ": " << show(c);
    EXPECT_FALSE(c == kErrorNonFinite);
  }
  EXPECT_GT(lum(ratio_colour(0)), 240);  // a passing case is mostly light
  EXPECT_TRUE(ratio_colour(-0.5) == ratio_colour(0));
  EXPECT_TRUE(ratio_colour(1.0001) == kErrorFail);
  EXPECT_TRUE(ratio_colour(1000) == kErrorFailDeep);
  EXPECT_TRUE(ratio_colour(1e30) == kErrorFailDeep);
  // Above 1 the red darkens with the ratio (log scale), staying red.
  double last_fail = 1e9;
  for (double r : {1.01, 2.0, 10.0, 100.0, 999.0}) {
    const Rgb c = ratio_colour(r);
    EXPECT_TRUE(c.r >= 120 && c.g < 30 && c.b < 30) << r << ": " << show(c);
    EXPECT_LT(lum(c), last_fail) << r;
    last_fail = lum(c);
  }
  EXPECT_TRUE(ratio_colour(std::numeric_limits<double>::infinity()) == kErrorNonFinite);
  EXPECT_TRUE(ratio_colour(std::nan("")) == kErrorNonFinite);
  // The failure colour is far from every colour of the scale.
  for (int i = 0; i <= 100; ++i) {
    const Rgb c = ratio_colour(i / 100.0);
    for (double r : {1.01, 10.0, 1000.0}) {
      const Rgb f = ratio_colour(r);
      EXPECT_GT(std::hypot(c.r - f.r, c.g - f.g, c.b - f.b), 100) << i << " vs " << r;
    }
  }
}

TEST_F(VizTest, PaddedBatchIsGreyedAndHatched) {
  Picture p;
  p.title = "padded batch";
  p.requests.push_back(request(eagle16(), 65, ""));
  p.requests.push_back(request(tree_from_fanout({2, 1, 1}, 5), 3, ""));
  RequestPicture pad = request({-1, 0, 0, 1}, 0, "");
  pad.padded = true;
  p.requests.push_back(pad);
  p.errors = errors_for(p.requests, 4, 3);
  const Layout lay = render(p, dir_ / "padded");
  const Png png(dir_ / "padded.png");
  ASSERT_EQ(lay.requests.size(), 3u);
  const RequestLayout& rl = lay.requests[2];
  EXPECT_RGB(png.at(rl.node_x[0], rl.node_y[0] - rl.node_radius * 0.75), kPadFill);
  auto [cx, cy] = cell_centre(rl, 0, 0);
  EXPECT_RGB(png.at(cx, cy), kPaddedVisible);
  // The real requests' roots keep the normal colours.
  auto [rx, ry] = cell_centre(lay.requests[0], 0, 0);
  EXPECT_RGB(png.at(rx, ry), kMaskVisible);
  // Heatmap rows 21..24 are padding: hatched (grey stripes), the rest is not.
  const HeatmapLayout& h = lay.heatmap;
  int hatch_pad = 0, hatch_real = 0;
  for (int x = 0; x < 60; ++x) {
    hatch_pad += png.at(h.box.x + x, h.box.y + 22 * h.row_height + 1) == kHatch;
    hatch_real += png.at(h.box.x + x, h.box.y + 3 * h.row_height + 1) == kHatch;
  }
  EXPECT_GT(hatch_pad, 10);
  EXPECT_EQ(hatch_real, 0);
}

// A rough well-formedness check: every element opened is closed, in order.
bool tags_balance(const std::string& s, std::string& why) {
  std::vector<std::string> open;
  for (size_t i = s.find('<'); i != std::string::npos; i = s.find('<', i + 1)) {
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 4, "<!--") == 0) continue;
    const size_t end = s.find('>', i);
    if (end == std::string::npos) return why = "unterminated tag", false;
    const bool closing = s[i + 1] == '/';
    const bool self = s[end - 1] == '/';
    const size_t name_begin = i + (closing ? 2 : 1);
    const size_t name_end = s.find_first_of(" \t\n/>", name_begin);
    const std::string name = s.substr(name_begin, name_end - name_begin);
    if (closing) {
      if (open.empty() || open.back() != name) return why = "unexpected </" + name + ">", false;
      open.pop_back();
    } else if (!self) {
      open.push_back(name);
    }
  }
  if (!open.empty()) return why = "<" + open.back() + "> never closed", false;
  return true;
}

TEST_F(VizTest, SvgIsXmlWithTheTitle) {
  const Picture p = eagle_picture();
  const Layout lay = render(p, dir_ / "doc");
  const std::string svg = slurp(dir_ / "doc.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<title>EAGLE draft, D=16, P=65 &lt;one leak &amp; one hidden cell&gt;</title>"),
            std::string::npos);
  EXPECT_NE(svg.find("<desc>Synthetic: mask cell (5, 9) leaks"), std::string::npos);
  EXPECT_NE(svg.find("<image"), std::string::npos);  // the rasterised grids
  EXPECT_NE(svg.find("width=\"" + std::to_string(lay.width) + "px\""), std::string::npos);
  std::string why;
  EXPECT_TRUE(tags_balance(svg, why)) << why;
  const auto last = svg.find_last_not_of(" \n\r\t");
  EXPECT_EQ(svg.substr(last - 5, 6), "</svg>");
  EXPECT_LT(fs::file_size(dir_ / "doc.svg"), 2u << 20);
}

TEST_F(VizTest, LargeTreesAndBatchesStayWithinBounds) {
  Picture p;
  p.title = "DDTree 128 and a 1024-node budget";
  p.requests.push_back(request(ddtree(128, 1), 700, "request 0 (DDTree, D=128)"));
  p.requests.push_back(request(ddtree(1024, 2), 4100, "request 1 (DDTree, D=1024)"));
  std::vector<int32_t> chain(300);
  for (int32_t t = 0; t < 300; ++t) chain[t] = t - 1;
  p.requests.push_back(request(chain, 1, "request 2 (chain, D=300)"));
  p.errors = errors_for(p.requests, 16, 5);
  const Layout lay = layout(p);
  EXPECT_LE(lay.width, 2500);
  EXPECT_LE(lay.height, 4000);
  ASSERT_EQ(lay.requests.size(), 3u);
  EXPECT_EQ(lay.requests[0].mask_bin, 1);
  EXPECT_EQ(lay.requests[0].cell, 4);
  EXPECT_EQ(lay.requests[1].mask_bin, 2);
  EXPECT_EQ(lay.requests[1].cell, 1);
  for (const RequestLayout& rl : lay.requests) {
    EXPECT_LE(rl.tree.w, 1201);
    EXPECT_LE(rl.tree.h, 760);
    EXPECT_LE(rl.mask.w, 512);
    for (size_t t = 0; t < rl.node_x.size(); ++t) {
      EXPECT_GE(rl.node_x[t], rl.tree.x);
      EXPECT_LE(rl.node_x[t], rl.tree.x + rl.tree.w);
      EXPECT_LE(rl.node_y[t], rl.tree.y + rl.tree.h);
      EXPECT_LE(rl.panel.x + rl.panel.w, lay.width);
    }
  }
  // Panels do not overlap.
  for (size_t a = 0; a < lay.requests.size(); ++a)
    for (size_t b = a + 1; b < lay.requests.size(); ++b) {
      const Box& u = lay.requests[a].panel;
      const Box& v = lay.requests[b].panel;
      EXPECT_TRUE(u.x + u.w <= v.x || v.x + v.w <= u.x || u.y + u.h <= v.y || v.y + v.h <= u.y);
    }
  // 1452 tokens: binned to at most 480 rows; 16 heads x 512: binned to at most 640 bins.
  const HeatmapLayout& h = lay.heatmap;
  EXPECT_EQ(h.token_bin, 4);
  EXPECT_LE(h.box.h, 480);
  EXPECT_LE(h.bins_per_head * 16, 640);
  EXPECT_LE(h.box.w, 1100);
  // Render it too: every pixel of the 1024 grid's band of bins is drawn.
  render(p, dir_ / "large");
  const Png png(dir_ / "large.png");
  EXPECT_EQ(png.width(), lay.width);
  auto [cx, cy] = cell_centre(lay.requests[1], 0, 0);
  EXPECT_FALSE(png.at(cx, cy) == kBackground);
}

TEST_F(VizTest, ManyRequestsDrawTheMismatchingOnesFirst) {
  Picture p;
  for (int i = 0; i < 40; ++i) p.requests.push_back(request(tree_from_fanout({2, 2}, 6), 10, ""));
  p.requests[33].visible[5 * 6 + 1] = 1;
  const Layout lay = layout(p);
  ASSERT_EQ(lay.requests.size(), static_cast<size_t>(kMaxRequestsDrawn));
  bool has33 = false;
  for (const RequestLayout& rl : lay.requests) has33 |= rl.index == 33;
  EXPECT_TRUE(has33);
  EXPECT_EQ(lay.requests[0].index, 0);
  EXPECT_LE(lay.height, 4000);
  // Large panels: fewer fit, a mismatching one still comes first.
  Picture big;
  for (int i = 0; i < 12; ++i) big.requests.push_back(request(ddtree(512, i), 100, ""));
  big.requests[11].visible[5 * 512 + 300] = 1;
  const Layout lb = layout(big);
  EXPECT_LT(lb.requests.size(), 12u);
  EXPECT_GE(lb.requests.size(), 3u);
  EXPECT_EQ(lb.requests.back().index, 11);
  EXPECT_LE(lb.height, 4500);
}

TEST_F(VizTest, BadPicturesAreRejectedByName) {
  auto message = [](const Picture& p) {
    try {
      layout(p);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  Picture p;
  p.requests.push_back(request(eagle16(), 65, ""));
  p.requests[0].parents[7] = 9;
  EXPECT_NE(message(p).find("request 0: parent[7] = 9"), std::string::npos) << message(p);
  p.requests[0] = request(eagle16(), 65, "");
  p.requests[0].visible.pop_back();
  EXPECT_NE(message(p).find("request 0: visible has 255"), std::string::npos) << message(p);
  p.requests[0] = request(eagle16(), 65, "");
  p.errors = errors_for(p.requests, 2, 1);
  p.errors.ratio.pop_back();
  EXPECT_NE(message(p).find("errors.ratio has"), std::string::npos) << message(p);
  p.errors = errors_for(p.requests, 2, 1);
  p.errors.worst.push_back({0, 3, 2, 0, 1, 1});
  EXPECT_NE(message(p).find("errors.worst[0]"), std::string::npos) << message(p);
  p.errors.worst.clear();
  p.errors.request_begin = {0, 10, 5};
  EXPECT_NE(message(p).find("errors.request_begin[2]"), std::string::npos) << message(p);
}

TEST_F(VizTest, UnwritableFileIsNamed) {
  const fs::path stem = dir_ / "no_such_folder" / "pic";
  try {
    render(eagle_picture(), stem);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "no_such_folder" / "pic.svg").string()),
              std::string::npos)
        << e.what();
  }
}

// The sample pictures (what to look at when changing the drawing) render at their layout's size.
// MLAV_VIZ_SAMPLES=<folder> keeps them there; otherwise they go to the scratch folder.
TEST_F(VizTest, SamplesRender) {
  const char* keep = std::getenv("MLAV_VIZ_SAMPLES");
  const fs::path out = keep != nullptr ? fs::path(keep) : dir_;
  fs::create_directories(out);
  std::vector<std::pair<std::string, Picture>> samples;
  samples.emplace_back("eagle16", eagle_picture());

  Picture padded;
  padded.title = "A padded batch: bs = 3 real requests, 1 CUDA-graph padding row";
  padded.requests.push_back(request(eagle16(), 65, "request 0 (EAGLE, D=16, P=65)"));
  padded.requests.push_back(request(tree_from_fanout({2, 1, 1}, 5), 3, "request 1 (D=5, P=3)"));
  padded.requests.push_back(request({-1, 0, 1, 2}, 129, "request 2 (MTP chain, D=4, P=129)"));
  padded.requests.push_back(request({-1, 0, 1, 2}, 0, "request 3 (D=4, P=0)"));
  padded.requests[3].padded = true;
  padded.requests[3].visible[1 * 4 + 0] = 0;
  padded.errors = errors_for(padded.requests, 8, 11);
  padded.errors.worst.push_back({2, 23, 5, 470, 3.2e-3, 4.0e-3});
  padded.caption = "Real rows are compared against the model; the padding row is hatched.";
  samples.emplace_back("padded", padded);

  Picture dd;
  dd.title = "DDTree budget, D=128, P=700, 16 heads";
  dd.requests.push_back(request(ddtree(128, 1), 700, "request 0 (DDTree, D=128, P=700)"));
  for (int t = 40; t < 128; t += 17) dd.requests[0].visible[t * 128 + t - 1] ^= 1;
  dd.errors = errors_for(dd.requests, 16, 9);
  ratio_at(dd.errors, 57, 11, 200) = 1.7f;
  dd.errors.worst.push_back({0, 57, 11, 200, 1.7e-2, 1e-2});
  dd.caption = "Every 17th query from 40 sees (or misses) its left neighbour.";
  samples.emplace_back("ddtree128", dd);

  Picture big;
  big.title = "Large: DDTree D=1024, chain D=300, 16 heads (binned)";
  big.requests.push_back(request(ddtree(1024, 2), 4100, "request 0 (DDTree, D=1024, P=4100)"));
  big.requests[0].visible[1000 * 1024 + 3] ^= 1;
  std::vector<int32_t> chain(300);
  for (int32_t t = 0; t < 300; ++t) chain[t] = t - 1;
  big.requests.push_back(request(chain, 1, "request 1 (chain, D=300, P=1)"));
  big.errors = errors_for(big.requests, 16, 5);
  ratio_at(big.errors, 1100, 2, 7) = 3.f;
  big.errors.worst.push_back({1, 1100, 2, 7, 3e-2, 1e-2});
  samples.emplace_back("large", big);

  // What a mask_indptr off by one looks like: requests 1 and 2 read their mask a row late.
  Picture shifted;
  shifted.title = "mask_indptr sliced one request late: requests 1 and 2 read shifted rows";
  shifted.requests.push_back(request(tree_from_fanout({3, 2, 1}, 8), 130, ""));
  shifted.requests.push_back(request(eagle16(), 64, ""));
  shifted.requests.push_back(request(tree_from_fanout({2, 2, 2}, 10), 1, ""));
  for (size_t i = 1; i < 3; ++i) {
    RequestPicture& r = shifted.requests[i];
    const size_t d = r.parents.size();
    for (size_t k = 0; k < d * d; ++k) r.visible[k] = r.expected[(k + d) % (d * d)];
  }
  shifted.errors = errors_for(shifted.requests, 8, 21);
  {
    Rng rng(4);
    ErrorPicture& e = shifted.errors;
    for (int64_t t = e.request_begin[1]; t < e.tokens; ++t)
      for (int32_t h = 0; h < e.heads; ++h)
        for (int32_t c = 0; c < e.columns; ++c)
          ratio_at(e, t, h, c) = static_cast<float>(0.3 + 40 * std::pow(rng.uniform(), 3));
    e.worst.push_back({1, 20, 6, 77, 0.41, 0.0104});
    e.worst.push_back({2, 31, 0, 500, 0.37, 0.0101});
    for (const WorstCell& w : e.worst) ratio_at(e, w.token, w.head, w.column) = 45.f;
  }
  shifted.caption = "Every row of requests 1 and 2 sees the previous row's columns; their outputs "
                    "fail everywhere, request 0 stays within bounds.";
  samples.emplace_back("indptr_shift", shifted);

  Picture bare;
  bare.title = "Only a title";
  samples.emplace_back("bare", bare);

  for (const auto& [name, picture] : samples) {
    const Layout lay = render(picture, out / name);
    const Png png(out / (name + ".png"));
    ASSERT_TRUE(png.ok()) << name;
    EXPECT_EQ(png.width(), lay.width) << name;
    EXPECT_EQ(png.height(), lay.height) << name;
    EXPECT_LE(lay.width, 2500) << name;
    EXPECT_LE(lay.height, 2500) << name;
    EXPECT_TRUE(fs::exists(out / (name + ".svg"))) << name;
  }
}

}  // namespace
}  // namespace mlaverify::viz

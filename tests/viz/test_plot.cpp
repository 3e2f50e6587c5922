// The simulate plots' axis ticks (viz/plot.h nice_ticks): round steps, the axis widened to them,
// labels with the decimals the step needs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "viz/plot.h"

namespace mlaverify::viz {
namespace {

std::vector<std::string> labels(double lo, double hi, int n) { return nice_ticks(lo, hi, n).labels; }

TEST(NiceTicks, RoundStepsCoverTheRange) {
  // The values the simulate plots drew before (runs per request up to 1,988; a 25.2-request
  // axis; a 0.1587 ms kernel time) and an axis of 10,000 steps.
  EXPECT_EQ(labels(0, 1893, 5), (std::vector<std::string>{"0", "500", "1000", "1500", "2000"}));
  EXPECT_EQ(labels(0, 16, 5), (std::vector<std::string>{"0", "5", "10", "15", "20"}));
  EXPECT_EQ(labels(0, 0.151, 5),
            (std::vector<std::string>{"0.00", "0.05", "0.10", "0.15", "0.20"}));
  EXPECT_EQ(labels(0, 9999, 6),
            (std::vector<std::string>{"0", "2000", "4000", "6000", "8000", "10000"}));
  EXPECT_EQ(labels(0, 1, 5), (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(labels(-3, 7, 5), (std::vector<std::string>{"-5", "0", "5", "10"}));
  EXPECT_EQ(labels(0, 2.5e6, 5), (std::vector<std::string>{"0", "500000", "1e+06", "1.5e+06",
                                                            "2e+06", "2.5e+06"}));
}

TEST(NiceTicks, LawsOverManyRanges) {
  // For ranges across magnitudes: the ticks cover [lo, hi], stay within max_ticks intervals, the
  // step is 1, 2 or 5 x 10^k, first and last are multiples of it, and labels are distinct.
  for (double lo : {0.0, -7.3, 0.001, 12.0, 1e5}) {
    for (double span : {1e-3, 0.07, 1.0, 3.3, 99.0, 1234.5, 7e6}) {
      for (int n : {2, 4, 5, 6}) {
        const Ticks t = nice_ticks(lo, lo + span, n);
        SCOPED_TRACE(std::to_string(lo) + " + " + std::to_string(span) + " / " + std::to_string(n));
        // (within 1e-6 of a step: the ends are computed multiples of the step, rounded)
        EXPECT_LE(t.first, lo + 1e-6 * t.step);
        EXPECT_GE(t.last, lo + span - 1e-6 * t.step);
        const double m = t.step / std::pow(10.0, std::floor(std::log10(t.step) + 1e-9));
        EXPECT_TRUE(std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9)
            << t.step;
        EXPECT_NEAR(t.first / t.step, std::round(t.first / t.step), 1e-6);
        ASSERT_GE(t.labels.size(), 2u);
        EXPECT_LE(t.labels.size(), static_cast<size_t>(n) + 1);
        for (size_t i = 1; i < t.labels.size(); ++i) EXPECT_NE(t.labels[i], t.labels[i - 1]);
      }
    }
  }
}

TEST(NiceTicks, DegenerateRangesStillGiveAnAxis) {
  EXPECT_EQ(labels(0, 0, 5), labels(0, 1, 5));
  EXPECT_EQ(labels(3, 3, 4).size(), 4u);  // 3 .. 3.3 in steps of 0.1
  EXPECT_EQ(labels(NAN, 1, 5), labels(0, 1, 4));
}

}  // namespace
}  // namespace mlaverify::viz

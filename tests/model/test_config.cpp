// Tests of model/config.h: the softmax scale of every preset against the docs/spec.md §1 table, the
// local-head rule under tensor parallelism, and the errors for bad tp and unknown presets.
#include <gtest/gtest.h>

#include <cmath>

#include "mlaverify/error.h"
#include "model/config.h"

namespace mlaverify::model {
namespace {

// docs/spec.md §1 prints sm_scale to 7 significant digits, so the printed value is within 5e-8 of
// the true one; 1e-7 leaves room for that rounding and nothing else.
constexpr double kTableTol = 1e-7;

TEST(Config, SmScaleMatchesSpecTable) {
  EXPECT_NEAR(preset("deepseek-v3").sm_scale(), 0.1352338, kTableTol);
  EXPECT_NEAR(preset("kimi-k2").sm_scale(), 0.1308608, kTableTol);
  EXPECT_NEAR(preset("kimi-k2-0905").sm_scale(), 0.1446796, kTableTol);
}

TEST(Config, SmScaleBaseIs192NotRowWidth) {
  // Without rope scaling mscale is 1 and the scale is exactly 192^-0.5 (one sqrt and one divide:
  // a few ulp of 2^-53). 576^-0.5 = 0.0417 would be docs/spec.md §7 class 4.
  MlaConfig c = preset("deepseek-v3");
  c.rope_factor = 1.0;
  EXPECT_NEAR(c.sm_scale(), 1.0 / std::sqrt(192.0), 1e-15);
  EXPECT_GT(std::abs(c.sm_scale() - 1.0 / std::sqrt(576.0)), 0.01);
  // factor < 1 is also "no scaling" (mscale stays 1, never below).
  c.rope_factor = 0.5;
  EXPECT_NEAR(c.sm_scale(), 1.0 / std::sqrt(192.0), 1e-15);
}

TEST(Config, PresetFieldsAndLocalHeads) {
  MlaConfig v3 = preset("deepseek-v3");
  EXPECT_EQ(v3.heads, 128);
  EXPECT_EQ(v3.qk_nope_dim, 128);
  EXPECT_EQ(v3.v_head_dim, 128);
  EXPECT_EQ(v3.rope_dim, 64);
  EXPECT_EQ(v3.local_heads(8), 16);  // docs/spec.md §1: DeepSeek-V3 at TP8
  EXPECT_EQ(v3.local_heads(1), 128);
  EXPECT_EQ(preset("kimi-k2").local_heads(8), 8);  // docs/spec.md §1: Kimi K2 at TP8
  EXPECT_EQ(preset("kimi-k2-0905").local_heads(64), 1);
}

TEST(Config, PresetNamesAllResolve) {
  std::vector<std::string> names = preset_names();
  ASSERT_EQ(names.size(), 3u);
  for (const std::string& n : names) EXPECT_EQ(preset(n).name, n);
}

TEST(Config, LocalHeadsRejectsNonDivisor) {
  MlaConfig k2 = preset("kimi-k2");
  try {
    k2.local_heads(3);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "tp");
    EXPECT_EQ(e.index(), -1);
  }
  EXPECT_THROW(k2.local_heads(0), InvalidInput);
  EXPECT_THROW(k2.local_heads(-8), InvalidInput);
  EXPECT_THROW(k2.local_heads(128), InvalidInput);  // more ranks than heads
}

TEST(Config, UnknownPresetNamesTheKnownOnes) {
  try {
    preset("deepseek-v2");
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(e.field(), "preset");
    EXPECT_EQ(e.index(), -1);
    std::string what = e.what();
    for (const std::string& n : preset_names()) {
      EXPECT_NE(what.find(n), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace mlaverify::model

// MLA presets and the softmax-scale rule of docs/spec.md §1 (DeepSeek-V3 / Kimi K2 YaRN mscale).
// The presets mirror the models' config.json (num_attention_heads, qk_nope_head_dim, rope_scaling).
#include "model/config.h"

#include <cmath>

#include "mlaverify/error.h"

namespace mlaverify::model {

double MlaConfig::sm_scale() const {
  double base = 1.0 / std::sqrt(static_cast<double>(qk_nope_dim + rope_dim));
  // DeepSeek's yarn_get_mscale(factor, mscale_all_dim): 1 when factor <= 1. The query and key are
  // each scaled by mscale in the reference implementation, hence the square in the softmax scale.
  double mscale = rope_factor > 1.0 ? 0.1 * mscale_all_dim * std::log(rope_factor) + 1.0 : 1.0;
  return base * mscale * mscale;
}

int32_t MlaConfig::local_heads(int32_t tp) const {
  if (tp < 1) {
    throw InvalidInput("tp", -1, "tensor parallelism must be >= 1, got " + std::to_string(tp));
  }
  if (heads % tp != 0) {
    throw InvalidInput("tp", -1,
                       "tp " + std::to_string(tp) + " does not divide the " +
                           std::to_string(heads) + " heads of " + name);
  }
  return heads / tp;
}

namespace {

// The one table of presets; preset() and preset_names() both read it so they cannot drift.
std::vector<MlaConfig> all_presets() {
  return {
      {"deepseek-v3", 128, 128, 128, 64, 40.0, 1.0},
      {"kimi-k2", 64, 128, 128, 64, 32.0, 1.0},
      {"kimi-k2-0905", 64, 128, 128, 64, 64.0, 1.0},
  };
}

}  // namespace

MlaConfig preset(std::string_view name) {
  std::string known;
  for (const MlaConfig& c : all_presets()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  throw InvalidInput("preset", -1, "unknown preset '" + std::string(name) + "'; known: " + known);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const MlaConfig& c : all_presets()) names.push_back(c.name);
  return names;
}

}  // namespace mlaverify::model

// MLA model configuration (docs/spec.md §1): head counts, head dims, YaRN rope scaling per preset,
// and the softmax scale the verify kernel must use (base (qk_nope + rope)^-0.5, never 576^-0.5).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlaverify::model {

struct MlaConfig {
  std::string name;
  int32_t heads = 0;            // query heads at TP1
  int32_t qk_nope_dim = 0;      // per-head non-rotary query/key width (128)
  int32_t v_head_dim = 0;       // per-head value width after W_vc (128)
  int32_t rope_dim = 0;         // rotary width (64)
  double rope_factor = 1.0;     // YaRN scaling factor; <= 1 means no scaling
  double mscale_all_dim = 0.0;  // YaRN mscale_all_dim

  // (qk_nope + rope)^-0.5 * mscale^2 with mscale = 0.1 * mscale_all_dim * ln(factor) + 1 when
  // factor > 1, else 1. The base is the non-absorbed head width (192): absorption rewrites the
  // dot product, not the scale, so 576^-0.5 would be a bug (docs/spec.md §7 class 4).
  double sm_scale() const;

  // Heads on one rank at tensor parallelism `tp`; InvalidInput("tp", -1, ..) unless tp >= 1
  // divides heads.
  int32_t local_heads(int32_t tp) const;
};

// The shipped presets: "deepseek-v3", "kimi-k2", "kimi-k2-0905".
// An unknown name raises InvalidInput("preset", -1, ...) listing the known ones.
MlaConfig preset(std::string_view name);

// Names accepted by preset(), in a fixed order.
std::vector<std::string> preset_names();

}  // namespace mlaverify::model

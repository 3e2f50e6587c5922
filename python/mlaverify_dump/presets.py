"""Model presets: the softmax scale of MLA under YaRN.

sm_scale = qk_head_dim^-0.5 * mscale^2 with qk_head_dim = 128 (nope) + 64 (rope) = 192 and
mscale = 0.1 * ln(factor) + 1 (mscale_all_dim = 1), factor the YaRN rope-scaling factor.
"""

import math

LATENT = 512  # kv_lora_rank: c, and V
ROPE = 64  # qk_rope_head_dim: k_pe
ROW = LATENT + ROPE  # 576, the cache row and the absorbed query width

YARN_FACTOR = {"deepseek-v3": 40.0, "kimi-k2": 32.0, "kimi-k2-0905": 64.0}


def preset_sm_scale(preset):
    if preset not in YARN_FACTOR:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(sorted(YARN_FACTOR))}")
    mscale = 0.1 * math.log(YARN_FACTOR[preset]) + 1.0
    return 192.0 ** -0.5 * mscale * mscale


PRESETS = {name: preset_sm_scale(name) for name in YARN_FACTOR}

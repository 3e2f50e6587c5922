"""bfloat16 without a bfloat16 dtype: values travel as their uint16 bit patterns.

numpy has no bfloat16, so this module converts between float arrays and the 16-bit patterns that
safetensors stores for dtype BF16 (the top half of an IEEE binary32, little-endian).
"""

import numpy as np


def bits_to_f32(bits):
    """uint16 BF16 bit patterns -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16_bits(x):
    """float array -> uint16 BF16 bit patterns, rounding to nearest, ties to even.

    float64 input is rounded directly (not through float32 first, which could round twice: a float64
    just above a bf16 halfway point can land exactly on it in float32 and then round to even, down).
    NaN stays NaN (quiet), infinities stay infinities, overflow rounds to infinity.
    """
    x = np.asarray(x)
    if x.dtype == np.float64:
        x32 = x.astype(np.float32)
    elif x.dtype in (np.float32, np.float16) or np.issubdtype(x.dtype, np.integer):
        x32 = x.astype(np.float32)
        x = None
    else:
        raise TypeError(f"cannot round dtype {x.dtype} to bf16")
    u = np.ascontiguousarray(x32).view(np.uint32)
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    out = ((u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)).astype(np.uint16)
    if x is not None:
        # float32 landed on a bf16 tie only because of its own rounding: decide by the float64.
        tie = ((u & np.uint32(0xFFFF)) == np.uint32(0x8000)) & (x32.astype(np.float64) != x)
        if np.any(tie):
            trunc = (u >> np.uint32(16)).astype(np.uint16)
            away = np.abs(x) > np.abs(x32.astype(np.float64))
            fixed = np.where(away, trunc + np.uint16(1), trunc).astype(np.uint16)
            out = np.where(tie, fixed, out)
    nan = np.isnan(x32)
    if np.any(nan):
        out = np.where(nan, ((u >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), out)
    return out.astype(np.uint16)


def round_bf16(x):
    """Values rounded to bf16, returned as float64 (for references computed from stored values)."""
    return bits_to_f32(to_bf16_bits(x)).astype(np.float64)

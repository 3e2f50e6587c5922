"""bf16 as numpy uint16 bit patterns (numpy has no bfloat16): exact widening, and rounding to
nearest-even (the dump writer's, mlaverify_dump/_bf16.py)."""

import numpy as np

from mlaverify_dump._bf16 import bits_to_f32, to_bf16_bits


def to_float32(a):
    """A stored buffer as float32: bf16 bits (uint16) widened exactly; float32 returned as is."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return bits_to_f32(a)
    if a.dtype == np.float32:
        return a
    raise TypeError(f"to_float32: dtype {a.dtype} is neither uint16 (bf16 bits) nor float32")


def from_float32(x):
    """float32/float64 values -> bf16 bits (uint16), round to nearest, ties to even."""
    return to_bf16_bits(x)


def store(out, values):
    """Writes float values into a stored output view: rounded to bf16 bits when out is uint16,
    as float32 otherwise (the two o_dtypes)."""
    if out.dtype == np.uint16:
        out[...] = to_bf16_bits(np.asarray(values))
    else:
        out[...] = np.asarray(values, dtype=np.float32)

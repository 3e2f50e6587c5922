"""A verify launch as arrays: what a Python backend's callable receives, and what a caller builds to
run a backend (the model, say) on data of its own.

Batch is a zero-copy numpy view of one mlav_params (c_api.h): every buffer the struct points to,
with the extent the struct implies (max_total_q rows, pool_slots slots through the layout,
kv_indices_len, mask_len, ...). Inputs are read-only views; o_lat and lse are writable views of
the caller's buffers, strides included, so a backend writes exactly where a kernel would (the suite
guards the rows past T and the gaps strides skip, and reports any write there).

bf16 buffers are numpy uint16 bit patterns (numpy has no bfloat16): mlaverify.bf16.to_float32 and
from_float32 convert. Enums are names: q_dtype "bf16" / "f32", mask_format "full", ...
"""

import ctypes

import numpy as np

from . import _abi
from .errors import InvalidInput

_NP_DTYPE = {0: np.uint16, 1: np.float32}  # bf16 as its bit pattern


class KvLayout:
    """Where slot s's latent c[512] and rotated k_pe[64] live in kv_pool (elements):
    c[s][k] = kv_pool[latent_offset + s * latent_stride + k], k_pe likewise with rope_*."""

    def __init__(self, kind, latent_offset, latent_stride, rope_offset, rope_stride):
        self.kind = kind
        self.latent_offset, self.latent_stride = int(latent_offset), int(latent_stride)
        self.rope_offset, self.rope_stride = int(rope_offset), int(rope_stride)

    def __repr__(self):
        return (f"KvLayout({self.kind}, latent {self.latent_offset}+s*{self.latent_stride}, "
                f"rope {self.rope_offset}+s*{self.rope_stride})")


def _base(ptr, dtype, count, writable):
    """A 1-D numpy array over count elements at ptr (None for a NULL pointer)."""
    if not ptr:
        return None
    count = max(int(count), 0)
    dtype = np.dtype(dtype)
    if count == 0:
        return np.empty(0, dtype)
    buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    a = np.frombuffer(buf, dtype=dtype, count=count)
    if not writable:
        a.flags.writeable = False
    return a


def _strided(base, offset, shape, strides, writable):
    if base is None:
        return None
    item = base.dtype.itemsize
    if any(s == 0 for s in shape):
        return np.empty(shape, base.dtype)
    return np.lib.stride_tricks.as_strided(base[offset:], shape=shape,
                                           strides=tuple(s * item for s in strides),
                                           writeable=writable)


def q_extent(p):
    if p.max_total_q <= 0:
        return 0
    row = max(p.q_latent_offset + 512, p.q_rope_offset + 64)
    return (p.max_total_q - 1) * p.q_token_stride + (p.num_heads - 1) * p.q_head_stride + row


def o_extent(p):
    if p.max_total_q <= 0:
        return 0
    return (p.max_total_q - 1) * p.o_token_stride + (p.num_heads - 1) * p.o_head_stride + 512


def pool_extent(p):
    if p.pool_slots <= 0:
        return 0
    L = p.kv_layout
    return max(L.latent_offset + (p.pool_slots - 1) * L.latent_stride + 512,
               L.rope_offset + (p.pool_slots - 1) * L.rope_stride + 64)


class Batch:
    """One launch's buffers as numpy arrays (see the module docstring). Fields, as in c_api.h:

    batch_size, num_heads, max_draft, num_splits, max_total_q, sm_scale
    q           [max_total_q, H, q_row] of q_dtype (strides q_token_stride, q_head_stride);
                q_lat = q[..., q_latent_offset:+512], q_pe = q[..., q_rope_offset:+64]
    kv_pool     1-D, of kv_dtype, read through kv_layout (KvLayout); pool_slots
    qo_indptr   int32 [bs + 1];  kv_indptr int32 [bs + 1]
    kv_indexing "token_i64" (kv_indices int64), "token_i32" (kv_indices_i32), "page_table"
                (block_table int32 [bs, block_table_stride], page_size)
    draft_source "extend_rows" (k_extend [max_total_q, k_extend_stride], latent-first rows) or
                "cache_slots" (the draft rows are the last D_i kv entries of each request)
    mask_format "full", "qlen_only", "qlen_only_bitpacking", "flashinfer_packed", "draft_bits";
                mask (uint8, or uint32 for draft_bits) [mask_len]; mask_indptr int64 [bs + 1]
                ("csr") or [bs] ("offsets_only"), for full and flashinfer_packed
    o_lat       writable [max_total_q, H, 512] of o_dtype (strides o_token_stride, o_head_stride)
    lse         writable float32 [max_total_q, H] (None if the caller passed none)
    """

    def __init__(self, params):
        p = params
        self.params = p
        self.batch_size, self.num_heads = p.batch_size, p.num_heads
        self.max_draft, self.num_splits = p.max_draft, p.num_splits
        self.max_total_q, self.sm_scale = p.max_total_q, p.sm_scale
        H, bs = p.num_heads, p.batch_size
        self.q_dtype = _abi.name_of(_abi.DTYPES, p.q_dtype)
        self.kv_dtype = _abi.name_of(_abi.DTYPES, p.kv_dtype)
        self.o_dtype = _abi.name_of(_abi.DTYPES, p.o_dtype)
        for field, v in (("q_dtype", p.q_dtype), ("kv_dtype", p.kv_dtype), ("o_dtype", p.o_dtype)):
            if v not in _NP_DTYPE:
                raise InvalidInput(f"{field}: unknown dtype {v}")
        self.q_latent_offset, self.q_rope_offset = p.q_latent_offset, p.q_rope_offset
        self.q_token_stride, self.q_head_stride = p.q_token_stride, p.q_head_stride
        q_row = max(p.q_latent_offset + 512, p.q_rope_offset + 64)
        self._q_base = _base(p.q, _NP_DTYPE[p.q_dtype], q_extent(p), False)
        self.q = _strided(self._q_base, 0, (p.max_total_q, H, q_row),
                          (p.q_token_stride, p.q_head_stride, 1), False)

        L = p.kv_layout
        self.kv_layout = KvLayout(_abi.name_of(_abi.LAYOUTS, L.kind), L.latent_offset,
                                  L.latent_stride, L.rope_offset, L.rope_stride)
        self.pool_slots = p.pool_slots
        self.kv_pool = _base(p.kv_pool, _NP_DTYPE[p.kv_dtype], pool_extent(p), False)

        self.qo_indptr = _base(p.qo_indptr, np.int32, bs + 1, False)
        self.kv_indptr = _base(p.kv_indptr, np.int32, bs + 1, False)
        self.kv_indexing = _abi.name_of(_abi.KV_INDEXINGS, p.kv_indexing)
        self.kv_indices = _base(p.kv_indices, np.int64, p.kv_indices_len, False)
        self.kv_indices_i32 = _base(p.kv_indices_i32, np.int32, p.kv_indices_len, False)
        self.kv_indices_len = p.kv_indices_len
        bt = _base(p.block_table, np.int32, bs * p.block_table_stride, False)
        self.block_table = None if bt is None else bt.reshape(bs, p.block_table_stride)
        self.block_table_stride, self.page_size = p.block_table_stride, p.page_size

        self.draft_source = _abi.name_of(_abi.DRAFT_SOURCES, p.draft_source)
        self.k_extend_stride = p.k_extend_stride
        ext_rows = p.max_total_q if p.draft_source == _abi.DRAFT_SOURCES["extend_rows"] else 0
        ext_count = (ext_rows - 1) * p.k_extend_stride + 576 if ext_rows > 0 else 0
        ke = _base(p.k_extend, _NP_DTYPE[p.kv_dtype], ext_count, False)
        self.k_extend = _strided(ke, 0, (ext_rows, 576), (p.k_extend_stride, 1), False)

        self.mask_format = _abi.name_of(_abi.MASK_FORMATS, p.mask_format)
        self.mask_indptr_convention = _abi.name_of(_abi.INDPTR_CONVENTIONS,
                                                   p.mask_indptr_convention)
        mask_dtype = np.uint32 if self.mask_format == "draft_bits" else np.uint8
        self.mask = _base(p.mask, mask_dtype, p.mask_len, False)
        self.mask_len = p.mask_len
        n_indptr = 0
        if self.mask_format in ("full", "flashinfer_packed"):
            n_indptr = bs + 1 if self.mask_indptr_convention == "csr" else bs
        self.mask_indptr = _base(p.mask_indptr, np.int64, n_indptr, False)
        self.mask_draft_stride, self.mask_word_bytes = p.mask_draft_stride, p.mask_word_bytes

        self.o_token_stride, self.o_head_stride = p.o_token_stride, p.o_head_stride
        self._o_base = _base(p.o_lat, _NP_DTYPE[p.o_dtype], o_extent(p), True)
        self.o_lat = _strided(self._o_base, 0, (p.max_total_q, H, 512),
                              (p.o_token_stride, p.o_head_stride, 1), True)
        self._lse_base = _base(p.lse, np.float32, p.max_total_q * H, True)
        self.lse = None if self._lse_base is None else self._lse_base.reshape(p.max_total_q, H)

    @property
    def total_q(self):
        """T = qo_indptr[bs]: the real query rows."""
        return int(self.qo_indptr[self.batch_size])

    @property
    def q_lat(self):
        return self.q[:, :, self.q_latent_offset:self.q_latent_offset + 512]

    @property
    def q_pe(self):
        return self.q[:, :, self.q_rope_offset:self.q_rope_offset + 64]

    def __repr__(self):
        return (f"Batch(bs={self.batch_size}, H={self.num_heads}, T={self.total_q}, "
                f"max_draft={self.max_draft}, q {self.q_dtype}, kv {self.kv_dtype} "
                f"{self.kv_layout.kind}, {self.kv_indexing}, {self.draft_source}, mask "
                f"{self.mask_format}, o {self.o_dtype})")

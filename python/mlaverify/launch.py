"""A verify launch built from numpy arrays the caller holds, to run any backend on (the model, the
CPU or CUDA backend, a Python backend): Launch(...).run(backend) fills launch.o_lat and launch.lse.

The common SGLang shapes only: q [T, H, 576] and a latent-first pool [N, 576], dense; prefix
slots as int64 kv_indices; the draft rows as k_extend [T, 576] (or, without k_extend, read from
the pool through kv_indices: the unified path); any mask format. Floats may be float32 (stored as
f32) or uint16 bf16 bit patterns (stored as bf16). Every check names the argument at fault.
"""

import ctypes

import numpy as np

from . import _abi
from .errors import InvalidInput


def _float_buffer(name, a, shape_tail):
    a = np.asarray(a)
    if a.dtype == np.uint16:
        dtype = "bf16"
    elif a.dtype in (np.float32, np.float64, np.float16):
        a, dtype = a.astype(np.float32), "f32"
    else:
        raise InvalidInput(f"{name}: dtype {a.dtype} is neither float32 nor uint16 (bf16 bits)")
    if tuple(a.shape[-len(shape_tail):]) != tuple(shape_tail):
        raise InvalidInput(f"{name}: expected shape [..., {', '.join(map(str, shape_tail))}], "
                           f"got {list(a.shape)}")
    return np.ascontiguousarray(a), dtype


def _int_buffer(name, a, dtype, length=None):
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer) or a.ndim != 1:
        raise InvalidInput(f"{name}: expected a 1-D integer array, got {a.dtype} {list(a.shape)}")
    if length is not None and a.shape[0] != length:
        raise InvalidInput(f"{name}: expected length {length}, got {a.shape[0]}")
    return np.ascontiguousarray(a.astype(dtype))


def _ptr(a):
    return None if a is None else a.ctypes.data


class Launch:
    def __init__(self, *, q, kv_pool, qo_indptr, kv_indptr, kv_indices, mask, sm_scale,
                 mask_indptr=None, k_extend=None, mask_format="full",
                 mask_indptr_convention="csr", mask_draft_stride=0, mask_word_bytes=4,
                 num_splits=1, o_dtype="bf16", max_draft=None):
        self.q, q_dtype = _float_buffer("q", q, (576,))
        if self.q.ndim != 3:
            raise InvalidInput(f"q: expected [T, H, 576], got {list(self.q.shape)}")
        T, H = self.q.shape[0], self.q.shape[1]
        pool = np.asarray(kv_pool)
        if pool.ndim == 3 and pool.shape[1] == 1:
            pool = pool[:, 0, :]
        self.kv_pool, kv_dtype = _float_buffer("kv_pool", pool, (576,))
        if self.kv_pool.ndim != 2:
            raise InvalidInput(f"kv_pool: expected [N, 576], got {list(self.kv_pool.shape)}")
        self.qo_indptr = _int_buffer("qo_indptr", qo_indptr, np.int32)
        bs = self.qo_indptr.shape[0] - 1
        if bs < 1:
            raise InvalidInput("qo_indptr: needs bs + 1 >= 2 entries")
        self.kv_indptr = _int_buffer("kv_indptr", kv_indptr, np.int32, bs + 1)
        self.kv_indices = _int_buffer("kv_indices", kv_indices, np.int64)
        if mask_format not in _abi.MASK_FORMATS:
            raise InvalidInput(f"mask_format: unknown {mask_format!r} "
                               f"(known: {', '.join(_abi.MASK_FORMATS)})")
        if mask_indptr_convention not in _abi.INDPTR_CONVENTIONS:
            raise InvalidInput(f"mask_indptr_convention: unknown {mask_indptr_convention!r}")
        mask_dtype = np.uint32 if mask_format == "draft_bits" else np.uint8
        self.mask = np.ascontiguousarray(np.asarray(mask).astype(mask_dtype).reshape(-1))
        self.mask_indptr = None
        if mask_format in ("full", "flashinfer_packed"):
            if mask_indptr is None:
                raise InvalidInput(f"mask_indptr: required for mask_format {mask_format!r}")
            self.mask_indptr = _int_buffer("mask_indptr", mask_indptr, np.int64)
        self.k_extend = None
        if k_extend is not None:
            ke = np.asarray(k_extend)
            if ke.ndim == 3 and ke.shape[1] == 1:
                ke = ke[:, 0, :]
            self.k_extend, ke_dtype = _float_buffer("k_extend", ke, (576,))
            if self.k_extend.shape[0] != T:
                raise InvalidInput(f"k_extend: expected {T} rows (q's), got {self.k_extend.shape[0]}")
            if ke_dtype != kv_dtype:
                raise InvalidInput(f"k_extend: dtype {ke_dtype} differs from kv_pool's {kv_dtype}")
        if o_dtype not in ("bf16", "f32"):
            raise InvalidInput(f"o_dtype: {o_dtype!r} is neither 'bf16' nor 'f32'")
        self.o_dtype = o_dtype
        self._o = np.zeros((T, H, 512), np.uint16 if o_dtype == "bf16" else np.float32)
        self.lse = np.full((T, H), np.nan, np.float32)
        if max_draft is None:
            max_draft = int(np.max(np.diff(self.qo_indptr))) if bs else 1
        p = _abi.mlav_params()
        p.struct_size, p.abi_version = ctypes.sizeof(p), _abi.ABI_VERSION
        p.batch_size, p.num_heads, p.max_draft = bs, H, max(int(max_draft), 1)
        p.num_splits, p.max_total_q, p.sm_scale = int(num_splits), T, float(sm_scale)
        p.q, p.q_dtype = _ptr(self.q), _abi.DTYPES[q_dtype]
        p.q_token_stride, p.q_head_stride = H * 576, 576
        p.q_latent_offset, p.q_rope_offset = 0, 512
        p.kv_pool, p.kv_dtype = _ptr(self.kv_pool), _abi.DTYPES[kv_dtype]
        p.kv_layout.kind = _abi.LAYOUTS["latent_first"]
        p.kv_layout.latent_offset, p.kv_layout.latent_stride = 0, 576
        p.kv_layout.rope_offset, p.kv_layout.rope_stride = 512, 576
        p.pool_slots = self.kv_pool.shape[0]
        p.qo_indptr, p.kv_indptr = _ptr(self.qo_indptr), _ptr(self.kv_indptr)
        p.kv_indexing = _abi.KV_INDEXINGS["token_i64"]
        p.kv_indices, p.kv_indices_len = _ptr(self.kv_indices), self.kv_indices.shape[0]
        p.page_size = 1
        p.draft_source = _abi.DRAFT_SOURCES["extend_rows" if k_extend is not None else
                                            "cache_slots"]
        p.k_extend, p.k_extend_stride = _ptr(self.k_extend), 576
        p.mask_format = _abi.MASK_FORMATS[mask_format]
        p.mask_indptr_convention = _abi.INDPTR_CONVENTIONS[mask_indptr_convention]
        p.mask, p.mask_len = _ptr(self.mask), self.mask.shape[0]
        p.mask_indptr = _ptr(self.mask_indptr)
        p.mask_draft_stride, p.mask_word_bytes = int(mask_draft_stride), int(mask_word_bytes)
        p.o_lat, p.o_dtype = _ptr(self._o), _abi.DTYPES[o_dtype]
        p.o_token_stride, p.o_head_stride = H * 512, 512
        p.lse = self.lse.ctypes.data
        self.params = p

    @property
    def o_lat(self):
        """The output as float32 [T, H, 512] (bf16 outputs widened exactly)."""
        if self.o_dtype == "f32":
            return self._o
        return (self._o.astype(np.uint32) << np.uint32(16)).view(np.float32)

    def run(self, backend):
        from .backend import as_backend
        as_backend(backend).run(self)
        return self

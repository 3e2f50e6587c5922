"""Reading a Batch's metadata on the host (numpy), every convention the C ABI carries: a request's
extent, the pool slots of its kv entries under any kv_indexing, its draft-block visibility under
any mask format (docs/spec.md section 3; include/mlaverify/types.h says each encoding). A Python
backend may read the buffers itself or call these; the suite checks the result either way."""

import numpy as np


def extent(b, i):
    """(q_begin, draft_nodes D_i, kv_begin, prefix_len P_i) of request i, as
    request_extent (verify_params.h) reads them."""
    q0, q1 = int(b.qo_indptr[i]), int(b.qo_indptr[i + 1])
    k0, k1 = int(b.kv_indptr[i]), int(b.kv_indptr[i + 1])
    d = q1 - q0
    p = (k1 - k0) - (d if b.draft_source == "cache_slots" else 0)
    return q0, d, k0, p


def kv_slots(b, i, first, count):
    """Pool slots (int64) of kv entries first .. first + count - 1 of request i (kv_slot)."""
    if count <= 0:  # P_i = 0: the index buffers may be absent altogether
        return np.empty(0, np.int64)
    k = np.arange(first, first + count, dtype=np.int64)
    if b.kv_indexing == "token_i64":
        return b.kv_indices[int(b.kv_indptr[i]) + k].astype(np.int64)
    if b.kv_indexing == "token_i32":
        return b.kv_indices_i32[int(b.kv_indptr[i]) + k].astype(np.int64)
    if b.kv_indexing == "page_table":
        ps = b.page_size
        return b.block_table[i, k // ps].astype(np.int64) * ps + k % ps
    raise ValueError(f"kv_indexing {b.kv_indexing!r} unknown")


def rows(b, slots):
    """(c [n, 512], k_pe [n, 64]) of the given slots, float64, through kv_layout (any kind)."""
    from .bf16 import to_float32
    L = b.kv_layout
    s = np.asarray(slots, np.int64)[:, None]
    c = b.kv_pool[L.latent_offset + s * L.latent_stride + np.arange(512)]
    k_pe = b.kv_pool[L.rope_offset + s * L.rope_stride + np.arange(64)]
    return to_float32(c).astype(np.float64), to_float32(k_pe).astype(np.float64)


def draft_block(b, i):
    """bool [D_i, D_i]: draft node t sees draft node j, read from b.mask in b.mask_format."""
    q0, d, _, p = extent(b, i)
    fmt, m = b.mask_format, b.mask
    if fmt == "full":  # [D, P + D] bytes from mask_indptr[i] (the start under either convention)
        start = int(b.mask_indptr[i])
        return m[start:start + d * (p + d)].reshape(d, p + d)[:, p:] != 0
    if fmt == "flashinfer_packed":  # the same rows, bit k of byte k / 8, from byte mask_indptr[i]
        start, n = int(b.mask_indptr[i]), d * (p + d)
        bits = np.unpackbits(m[start:start + (n + 7) // 8], bitorder="little")[:n]
        return bits.reshape(d, p + d)[:, p:] != 0
    S = b.mask_draft_stride
    if fmt == "qlen_only":  # [bs, S, S] bytes
        return m[i * S * S:(i + 1) * S * S].reshape(S, S)[:d, :d] != 0
    if fmt == "qlen_only_bitpacking":  # [bs, S] words of W bytes, little-endian, bit j = column j
        W = b.mask_word_bytes
        raw = m[(i * S) * W:(i * S + d) * W].reshape(d, W).astype(np.uint64)
        words = (raw << (8 * np.arange(W, dtype=np.uint64))).sum(axis=1)
        return ((words[:, None] >> np.arange(d, dtype=np.uint64)) & 1) != 0
    if fmt == "draft_bits":  # uint32 [T, S] per draft token, bit j % 32 of word j / 32
        words = m[(q0 * S):(q0 + d) * S].reshape(d, S).astype(np.uint64)
        j = np.arange(d)
        return ((words[:, j // 32] >> (j % 32).astype(np.uint64)) & 1) != 0
    raise ValueError(f"mask_format {fmt!r} unknown")

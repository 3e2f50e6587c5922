"""A float64 reference of target-verify MLA attention, read from a dump's tensors as SGLang wrote them.

For request i with P = kv_indptr[i+1] - kv_indptr[i] prefix keys and D = qo_indptr[i+1] - qo_indptr[i]
draft tokens, the keys are the pool rows kv_buffer[kv_indices[kv_indptr[i] + n]] (n < P) followed by
the draft rows k_extend[qo_indptr[i] + j] (j < D; kv_buffer[out_cache_loc[...]] when the dump has no
k_extend). A 576-wide row is [c (512) | k_pe (64)] (latent-first); the score of query row q is
sm_scale * q . row over all 576 columns, and V is the row's c.

custom_mask is FULL_MASK: request i's bytes start at mask_indptr[i], row-major [D, P + D], row t for
draft token t. Only the draft block (columns P..P+D-1) is read; prefix columns are all visible.

The options express wrong readings a buggy kernel could make (used by synth for the corrupted
copies): rope_first reads every cache row as [k_pe (64) | c (512)]; mask_starts replaces
mask_indptr[:bs] as the segment starts (bytes past the end of custom_mask read as 0).

A row that sees no key has o = 0 and lse = -inf (the empty sum), as the project's model.
"""

import numpy as np

from .presets import LATENT, ROPE, ROW


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def request_keys(d, i, rope_first=False):
    """-> (K [P + D, 576] in the query's [c | k_pe] order, V [P + D, 512]) as float64."""
    pool = _f64(d["kv_buffer"]).reshape(-1, ROW)
    kv_indptr = np.asarray(d["kv_indptr"], dtype=np.int64)
    qo_indptr = np.asarray(d["qo_indptr"], dtype=np.int64)
    idx = np.asarray(d["kv_indices"], dtype=np.int64)[kv_indptr[i]:kv_indptr[i + 1]]
    prefix = pool[idx]
    if d.get("k_extend") is not None:
        draft = _f64(d["k_extend"]).reshape(-1, ROW)[qo_indptr[i]:qo_indptr[i + 1]]
    else:
        loc = np.asarray(d["out_cache_loc"], dtype=np.int64)[qo_indptr[i]:qo_indptr[i + 1]]
        draft = pool[loc]
    rows = np.concatenate([prefix, draft], axis=0)
    if rope_first:
        c, pe = rows[:, ROPE:], rows[:, :ROPE]
    else:
        c, pe = rows[:, :LATENT], rows[:, LATENT:]
    return np.concatenate([c, pe], axis=1), c


def request_visibility(d, i, mask_start=None):
    """-> bool [D, P + D]: which keys draft token t of request i sees, as the kernel reads the mask."""
    kv_indptr = np.asarray(d["kv_indptr"], dtype=np.int64)
    qo_indptr = np.asarray(d["qo_indptr"], dtype=np.int64)
    P = int(kv_indptr[i + 1] - kv_indptr[i])
    D = int(qo_indptr[i + 1] - qo_indptr[i])
    mask = np.asarray(d["custom_mask"]).astype(bool)
    start = int(np.asarray(d["mask_indptr"])[i]) if mask_start is None else int(mask_start)
    t = np.arange(D)[:, None]
    j = np.arange(D)[None, :]
    off = start + t * (P + D) + P + j
    inside = (off >= 0) & (off < mask.shape[0])
    draft = np.zeros((D, D), dtype=bool)
    draft[inside] = mask[off[inside]]
    return np.concatenate([np.ones((D, P), dtype=bool), draft], axis=1)


def reference_attention(d, sm_scale, *, rope_first=False, mask_starts=None, requests=None):
    """-> (o [T, H, 512], lse [T, H]) in float64; rows of requests not computed are NaN.

    d: mapping of tensor name -> array (float values for q, kv_buffer, k_extend).
    """
    q = _f64(d["q"])
    T, H, _ = q.shape
    qo_indptr = np.asarray(d["qo_indptr"], dtype=np.int64)
    bs = qo_indptr.shape[0] - 1
    o = np.full((T, H, LATENT), np.nan)
    lse = np.full((T, H), np.nan)
    for i in range(bs) if requests is None else requests:
        a, b = int(qo_indptr[i]), int(qo_indptr[i + 1])
        if a == b:
            continue
        K, V = request_keys(d, i, rope_first)
        vis = request_visibility(d, i, None if mask_starts is None else mask_starts[i])
        s = sm_scale * np.einsum("thc,nc->thn", q[a:b], K)
        s = np.where(vis[:, None, :], s, -np.inf)
        m = s.max(axis=2, keepdims=True)
        empty = ~np.isfinite(m)
        p = np.exp(s - np.where(empty, 0.0, m))
        l = p.sum(axis=2, keepdims=True)
        oi = np.einsum("thn,nc->thc", p, V) / np.where(empty, 1.0, l)
        o[a:b] = np.where(empty, 0.0, oi)
        with np.errstate(divide="ignore"):
            lse[a:b] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, l)))[..., 0]
    return o, lse


def rel_frobenius(x, ref):
    """||x - ref||_F / ||ref||_F (0 when both are 0)."""
    x = _f64(x)
    ref = _f64(ref)
    den = np.linalg.norm(ref)
    num = np.linalg.norm(x - ref)
    return float(num / den) if den > 0 else float(num)

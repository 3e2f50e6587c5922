"""write_verify_dump: one target-verify attention call of one layer -> one safetensors file."""

import json
import math
from types import SimpleNamespace

import numpy as np

from . import __version__
from ._bf16 import bits_to_f32, to_bf16_bits
from ._st import NP_TO_ST, read_file, write_file
from .presets import LATENT, PRESETS, ROW

LAYOUTS = ("latent-first", "rope-first")
FLOAT_TARGETS = {"bf16": "BF16", "bfloat16": "BF16", "fp16": "F16", "float16": "F16",
                 "fp32": "F32", "float32": "F32"}
RESERVED_METADATA = ("preset", "tp", "heads", "sm_scale", "page_size", "layout", "bs", "raw_bs",
                     "draft_tokens", "parents", "producer")
INT_ST = ("U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64")


class DumpError(ValueError):
    """A verify call that cannot be written as a dump; the message names the tensor and index."""


def _storage(name, x):
    """Any array-like (numpy, torch, ml_dtypes bfloat16, lists) -> (st_dtype, numpy storage)."""
    if x is None:
        return None
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "detach"):
        import torch

        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            return "BF16", t.contiguous().view(torch.int16).numpy().view(np.uint16).copy()
        a = t.contiguous().numpy()
    else:
        a = np.asarray(x)
        if a.dtype.name == "bfloat16":  # ml_dtypes.bfloat16 (or jax's): same bits as BF16
            return "BF16", np.ascontiguousarray(a).view(np.uint16).copy()
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    st = NP_TO_ST.get(np.dtype(a.dtype).newbyteorder("="))
    if st is None:
        raise DumpError(f"{name}: unsupported dtype {a.dtype}")
    return st, a


def _float_tensor(name, x, float_dtype):
    st, a = _storage(name, x)
    if st not in ("BF16", "F16", "F32", "F64"):
        raise DumpError(f"{name}: expected a floating tensor (bf16, fp16 or fp32), got {st}")
    if float_dtype is None:
        if st == "F64":
            raise DumpError(f"{name}: float64 is not a kernel dtype; pass float_dtype='bf16' "
                            "(or 'fp32') to round it")
        return st, a
    target = FLOAT_TARGETS.get(str(float_dtype).lower())
    if target is None:
        raise DumpError(f"float_dtype must be one of {sorted(FLOAT_TARGETS)}, not {float_dtype!r}")
    if target == st:
        return st, a
    values = bits_to_f32(a) if st == "BF16" else a
    if target == "BF16":
        return "BF16", to_bf16_bits(values)
    return target, values.astype(np.float16 if target == "F16" else np.float32)


def _int_tensor(name, x, ndim=1):
    st, a = _storage(name, x)
    if st not in INT_ST:
        raise DumpError(f"{name}: expected an integer tensor, got {st}")
    if a.ndim != ndim:
        raise DumpError(f"{name}: expected {ndim}-D, got shape {list(a.shape)}")
    return st, a


def _shape_error(name, a, want):
    return DumpError(f"{name}: expected shape {want}, got {list(a.shape)}")


def _check_indptr(name, a, length, total, total_name):
    if a.shape[0] != length:
        raise DumpError(f"{name}: expected {length} entries (bs + 1), got {a.shape[0]}")
    v = a.astype(np.int64)
    if v[0] != 0:
        raise DumpError(f"{name}[0] = {v[0]}, expected 0")
    bad = np.nonzero(np.diff(v) < 0)[0]
    if bad.size:
        i = int(bad[0])
        raise DumpError(f"{name} decreases at index {i + 1}: {v[i]} -> {v[i + 1]}")
    if v[-1] != total:
        raise DumpError(f"{name}[{length - 1}] = {v[-1]} but {total_name} has {total} entries")


def _check_range(name, a, hi, hi_name):
    v = a.astype(np.int64).ravel()
    bad = np.nonzero((v < 0) | (v >= hi))[0]
    if bad.size:
        i = int(bad[0])
        idx = np.unravel_index(i, a.shape)
        idx = idx[0] if len(idx) == 1 else tuple(int(k) for k in idx)
        raise DumpError(f"{name}[{idx}] = {v[i]} is outside [0, {hi}) ({hi_name})")


def _check_parents(parents, raw_bs, draft_lens):
    if isinstance(parents, str):
        parents = json.loads(parents)
    parents = [[int(p) for p in tree] for tree in parents]
    if len(parents) != raw_bs:
        raise DumpError(f"parents: {len(parents)} trees for raw_bs = {raw_bs} real requests")
    for i, tree in enumerate(parents):
        if len(tree) != draft_lens[i]:
            raise DumpError(f"parents[{i}]: {len(tree)} nodes, but request {i} has "
                            f"{draft_lens[i]} draft tokens")
        for t, p in enumerate(tree):
            if p < -1 or p >= len(tree) or p == t:
                raise DumpError(f"parents[{i}][{t}] = {p} is not -1 or another node's index")
        for t in range(len(tree)):  # every chain of parents must reach a root
            seen, j = 0, t
            while j != -1:
                j = tree[j]
                seen += 1
                if seen > len(tree):
                    raise DumpError(f"parents[{i}]: node {t} is on a cycle")
    return parents


def write_verify_dump(path, *, q, kv_buffer, qo_indptr, kv_indptr, kv_indices, custom_mask,
                      mask_indptr, seq_lens, req_pool_indices, req_to_token, positions,
                      out_cache_loc, o=None, lse=None, k_extend=None, preset=None, tp=None,
                      sm_scale=None, page_size=1, raw_bs=None, parents=None,
                      producer=None, extra_metadata=None, layout="latent-first",
                      float_dtype=None, compact=False):
    """Write one target-verify attention call of one layer as a safetensors dump.

    Tensors may be numpy arrays, torch tensors (any device; copied with .detach().cpu()) or
    ml_dtypes bfloat16 arrays. Floating tensors keep their dtype (bf16, fp16, fp32) unless
    float_dtype ('bf16', 'fp16', 'fp32') says to convert; lse is always stored as fp32. Integer
    tensors keep their dtype. custom_mask is stored as bool (nonzero bytes are True).

    Shapes (T draft tokens, H heads, N pool slots, bs requests incl. CUDA-graph padding):
      q [T, H, 576] (latent 512 then rope 64), kv_buffer [N, 1, 576] or [N, 576],
      k_extend [T, 1, 576] or [T, 576], o [T, H, 512], lse [T, H] (natural log),
      qo_indptr, kv_indptr [bs + 1], mask_indptr [bs + 1] (or [bs]: offsets only),
      seq_lens, req_pool_indices [bs],
      kv_indices [kv_indptr[bs]], custom_mask [mask_indptr[bs]], positions, out_cache_loc [T],
      req_to_token [rows, max_len].

    sm_scale defaults to the preset's; one of the two is required. compact=True keeps only the
    pool slots and req_to_token rows the batch refers to (slot 0 and row 0 kept as padding) and
    renumbers every index consistently, so a dump of a large pool stays small.

    Raises DumpError (a ValueError) naming the tensor, and the index where one is at fault.
    Returns the metadata dict written.
    """
    T_ = {}

    # ---- floating tensors
    st, a = _float_tensor("q", q, float_dtype)
    if a.ndim != 3 or a.shape[2] != ROW:
        raise _shape_error("q", a, f"[T, H, {ROW}]")
    T, H = int(a.shape[0]), int(a.shape[1])
    if T < 1 or H < 1:
        raise _shape_error("q", a, f"[T >= 1, H >= 1, {ROW}]")
    T_["q"] = (st, a)

    # kv_buffer and req_to_token can be a live server's whole tables (gigabytes): their shapes are
    # checked here, their contents converted last, after compaction picked what the batch uses.
    if kv_buffer is None:
        raise DumpError("kv_buffer is required")
    kv_shape = _shape_of(kv_buffer)
    if not ((len(kv_shape) == 3 and kv_shape[1] == 1 and kv_shape[2] == ROW)
            or (len(kv_shape) == 2 and kv_shape[1] == ROW)):
        raise _shape_error("kv_buffer", SimpleNamespace(shape=kv_shape), f"[N, 1, {ROW}] or [N, {ROW}]")
    N = kv_shape[0]

    if k_extend is not None:
        st, a = _float_tensor("k_extend", k_extend, float_dtype)
        if not ((a.ndim == 3 and a.shape[1] == 1 and a.shape[2] == ROW)
                or (a.ndim == 2 and a.shape[1] == ROW)) or a.shape[0] != T:
            raise _shape_error("k_extend", a, f"[{T}, 1, {ROW}] or [{T}, {ROW}] (T from q)")
        T_["k_extend"] = (st, a)
    if o is not None:
        st, a = _float_tensor("o", o, float_dtype)
        if a.shape != (T, H, LATENT):
            raise _shape_error("o", a, f"[{T}, {H}, {LATENT}] (T, H from q)")
        T_["o"] = (st, a)
    if lse is not None:
        st, a = _storage("lse", lse)
        if st not in ("BF16", "F16", "F32", "F64"):
            raise DumpError(f"lse: expected a floating tensor, got {st}")
        values = bits_to_f32(a) if st == "BF16" else a.astype(np.float32)
        if values.shape != (T, H):
            raise _shape_error("lse", values, f"[{T}, {H}] (T, H from q)")
        T_["lse"] = ("F32", values.astype(np.float32))

    # ---- integer metadata
    for name, x in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr),
                    ("kv_indices", kv_indices), ("mask_indptr", mask_indptr),
                    ("seq_lens", seq_lens), ("req_pool_indices", req_pool_indices),
                    ("positions", positions), ("out_cache_loc", out_cache_loc)):
        if x is None:
            raise DumpError(f"{name} is required")
        T_[name] = _int_tensor(name, x)
    if req_to_token is None:
        raise DumpError("req_to_token is required")
    rtt_shape = _shape_of(req_to_token)
    if len(rtt_shape) != 2:
        raise DumpError(f"req_to_token: expected 2-D, got shape {list(rtt_shape)}")

    st, a = _storage("custom_mask", custom_mask)
    if st not in ("BOOL",) + INT_ST:
        raise DumpError(f"custom_mask: expected bool (or bytes), got {st}")
    if a.ndim != 1:
        raise DumpError(f"custom_mask: expected 1-D, got shape {list(a.shape)}")
    T_["custom_mask"] = ("BOOL", a != 0 if st != "BOOL" else a)

    arr = {k: v[1] for k, v in T_.items()}
    bs = int(arr["seq_lens"].shape[0])
    if bs < 1:
        raise DumpError("seq_lens: empty batch")
    for name in ("req_pool_indices",):
        if arr[name].shape[0] != bs:
            raise DumpError(f"{name}: expected {bs} entries (bs, from seq_lens), got {arr[name].shape[0]}")
    for name in ("positions", "out_cache_loc"):
        if arr[name].shape[0] != T:
            raise DumpError(f"{name}: expected {T} entries (T, from q), got {arr[name].shape[0]}")
    _check_indptr("qo_indptr", arr["qo_indptr"], bs + 1, T, "q")
    empty = np.nonzero(np.diff(arr["qo_indptr"].astype(np.int64)) == 0)[0]
    if empty.size:
        raise DumpError(f"qo_indptr: request {int(empty[0])} has no draft token (a verify call "
                        "has at least one per request)")
    _check_indptr("kv_indptr", arr["kv_indptr"], bs + 1, arr["kv_indices"].shape[0], "kv_indices")
    mi = arr["mask_indptr"]
    if mi.shape[0] == bs:
        # offsets only ([bs], the "sliced [:bs]" convention some kernels take): each entry a start
        v = mi.astype(np.int64)
        bad = np.nonzero((v < 0) | (v > arr["custom_mask"].shape[0]))[0]
        if bad.size:
            raise DumpError(f"mask_indptr[{int(bad[0])}] = {v[bad[0]]} is outside custom_mask's "
                            f"{arr['custom_mask'].shape[0]} entries")
    else:
        if mi.shape[0] != bs + 1:
            raise DumpError(f"mask_indptr: expected {bs + 1} entries (bs + 1; or bs, offsets "
                            f"only), got {mi.shape[0]}")
        _check_indptr("mask_indptr", mi, bs + 1, arr["custom_mask"].shape[0], "custom_mask")
    _check_range("kv_indices", arr["kv_indices"], N, "kv_buffer slots")
    _check_range("out_cache_loc", arr["out_cache_loc"], N, "kv_buffer slots")
    _check_range("req_pool_indices", arr["req_pool_indices"], rtt_shape[0], "req_to_token rows")

    # ---- metadata
    if raw_bs is None:
        raw_bs = bs
    raw_bs = int(raw_bs)
    if not 0 <= raw_bs <= bs:
        raise DumpError(f"raw_bs = {raw_bs} must be in [0, bs = {bs}]")
    if preset is not None and preset not in PRESETS:
        raise DumpError(f"unknown preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
    if sm_scale is None:
        if preset is None:
            raise DumpError("give sm_scale (layer.scaling) or a preset")
        sm_scale = PRESETS[preset]
    sm_scale = float(sm_scale)
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise DumpError(f"sm_scale = {sm_scale} must be positive and finite")
    if preset is not None and abs(sm_scale / PRESETS[preset] - 1) > 1e-6:
        # mlaverify's loader rejects such a file (its metadata disagrees with itself)
        raise DumpError(f"sm_scale {sm_scale:.7g} is not preset {preset}'s "
                        f"{PRESETS[preset]:.7g}: give one of the two (from_sglang records the "
                        "server's layer.scaling as server_sm_scale and replays with the preset's)")
    if layout not in LAYOUTS:
        raise DumpError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    page_size = int(page_size)
    if page_size < 1:
        raise DumpError(f"page_size = {page_size} must be >= 1")

    draft_lens = np.diff(arr["qo_indptr"].astype(np.int64))
    meta = {"heads": str(H), "sm_scale": repr(sm_scale), "page_size": str(page_size),
            "layout": layout, "bs": str(bs), "raw_bs": str(raw_bs),
            "producer": producer or f"mlaverify_dump {__version__}"}
    if preset is not None:
        meta["preset"] = preset
    if tp is not None:
        meta["tp"] = str(int(tp))
    if len(set(draft_lens.tolist())) == 1:
        meta["draft_tokens"] = str(int(draft_lens[0]))
    if parents is not None:
        meta["parents"] = json.dumps(_check_parents(parents, raw_bs, draft_lens.tolist()))
    for k, v in (extra_metadata or {}).items():
        if k in RESERVED_METADATA:
            raise DumpError(f"extra_metadata: {k!r} is a reserved key; pass it as an argument")
        meta[str(k)] = str(v)

    if compact:
        kv_buffer = _compact(T_, kv_buffer, req_to_token, N)
    else:
        T_["req_to_token"] = _int_tensor("req_to_token", req_to_token, ndim=2)
    T_["kv_buffer"] = _float_tensor("kv_buffer", kv_buffer, float_dtype)
    if "k_extend" in T_ and T_["k_extend"][0] != T_["kv_buffer"][0]:
        raise DumpError(f"k_extend is {T_['k_extend'][0]} but kv_buffer {T_['kv_buffer'][0]}: "
                        "the kernel reads both as one dtype (float_dtype= converts both)")
    write_file(path, T_, meta)
    return meta


def _shape_of(x):
    if hasattr(x, "shape"):
        return tuple(int(s) for s in x.shape)
    return tuple(np.shape(x))


def _take(x, rows, cols=None):
    """x[rows][:, :cols], gathered where x lives (a CUDA tensor is gathered on the device)."""
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "detach"):
        import torch

        y = x.detach()[torch.as_tensor(rows, dtype=torch.long, device=x.device)]
    else:
        y = np.asarray(x)[rows]
    return y if cols is None else y[:, :cols]


def _compact(T_, pool, req_to_token, N):
    """Keep only the slots and req_to_token rows the batch refers to; renumber consistently.

    Kept rows: 0 (padding) and req_pool_indices, cut to the longest P + D; kept slots: 0
    (padding), kv_indices, out_cache_loc and every entry of the kept rows. Old ids keep their
    relative order, so the scatter of the batch is preserved and an inconsistency between
    kv_indices and req_to_token (a stale slot) survives compaction. Returns the kept pool rows.
    """
    rows = np.unique(np.concatenate([[0], T_["req_pool_indices"][1].astype(np.int64)]))
    row_of = {int(r): i for i, r in enumerate(rows)}
    # columns: every request's prefix and draft tokens (seq_lens and kv_indptr may disagree in a
    # buggy server: keep the longer)
    d = np.diff(T_["qo_indptr"][1].astype(np.int64))
    p = np.maximum(np.diff(T_["kv_indptr"][1].astype(np.int64)),
                   T_["seq_lens"][1].astype(np.int64))
    cols = max(1, int((p + d).max()))
    rst, rtt = _int_tensor("req_to_token", _take(req_to_token, rows, cols), ndim=2)
    refs = [np.array([0]), T_["kv_indices"][1].astype(np.int64),
            T_["out_cache_loc"][1].astype(np.int64)]
    r = rtt.astype(np.int64).ravel()
    refs.append(r[(r >= 0) & (r < N)])
    slots = np.unique(np.concatenate(refs))
    new_id = np.zeros(N, dtype=np.int64)
    new_id[slots] = np.arange(slots.size)

    def remap(name):
        st, a = T_[name]
        T_[name] = (st, new_id[a.astype(np.int64)].astype(a.dtype))

    remap("kv_indices")
    remap("out_cache_loc")
    inside = (rtt >= 0) & (rtt < N)
    rtt_new = np.where(inside, new_id[np.clip(rtt.astype(np.int64), 0, N - 1)], 0)
    T_["req_to_token"] = (rst, rtt_new.astype(rtt.dtype))
    pst, rpi = T_["req_pool_indices"]
    T_["req_pool_indices"] = (pst, np.array([row_of[int(x)] for x in rpi], dtype=rpi.dtype))
    return _take(pool, slots)


def read_verify_dump(path):
    """-> (tensors, dtypes, metadata): BF16 tensors as float32 values, dtypes as safetensors names."""
    return read_file(path)

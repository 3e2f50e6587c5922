"""Dumping from inside SGLang's attention backend (target verify).

Call from TritonAttnBackend.forward_extend after extend_attention_fwd has written o:

    if forward_batch.forward_mode.is_target_verify():
        from mlaverify_dump import maybe_dump_sglang
        maybe_dump_sglang(forward_batch, layer, q, k, o, backend=self)

Nothing happens unless MLAVERIFY_DUMP_DIR is set; see python/README.md.
"""

import os

from .writer import write_verify_dump

_calls = {}  # layer id -> target-verify calls seen


def _capturing():
    try:
        import torch

        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:  # no torch, or no CUDA
        return False


def _rank():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    return 0


def _tp_size():
    try:
        from sglang.srt.layers.dp_attention import get_attention_tp_size

        return int(get_attention_tp_size())
    except Exception:
        return None


def from_sglang(forward_batch, layer, q, k_extend, o, *, path, backend=None, lse=None,
                preset=None, tp=None, raw_bs=None, parents=None, compact=True, producer=None,
                extra_metadata=None):
    """Write the target-verify call that just ran, with SGLang's own tensors, to path.

    forward_batch, layer: forward_extend's arguments; q: its q ([T, H*576] or [T, H, 576]);
    k_extend: its k (the draft tokens' rows, [T, 1, 576]); o: the output extend_attention_fwd
    wrote ([T, H*512]); backend: the attention backend (default forward_batch.attn_backend),
    whose forward_metadata holds qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr.
    kv_indices and custom_mask are cut to kv_indptr[bs] and mask_indptr[bs] (SGLang may
    allocate them larger), and compact=True keeps only the pool slots and req_to_token rows the
    batch uses (a layer's pool is often gigabytes), gathered on the device before the copy.
    sm_scale: the preset's when preset is given (layer.scaling then goes into the metadata as
    server_sm_scale), else layer.scaling.
    """
    if backend is None:
        backend = forward_batch.attn_backend
    md = backend.forward_metadata
    H = layer.tp_q_head_num
    kv_indptr = md.kv_indptr
    mask_indptr = md.mask_indptr
    n_kv = int(kv_indptr[-1])
    n_mask = int(mask_indptr[-1])
    if tp is None:
        tp = _tp_size()
    sm_scale = float(layer.scaling)
    extra = dict(extra_metadata or {})
    if preset is not None:
        # Replay with the preset's scale, so that a server whose layer.scaling is wrong (mscale
        # missing, 576^-0.5) shows as a mismatch; what the server used is kept beside it.
        extra.setdefault("server_sm_scale", repr(sm_scale))
        sm_scale = None
    return write_verify_dump(
        path,
        q=q.reshape(-1, H, layer.qk_head_dim),
        kv_buffer=forward_batch.token_to_kv_pool.get_key_buffer(layer.layer_id),
        k_extend=k_extend,
        qo_indptr=md.qo_indptr,
        kv_indptr=kv_indptr,
        kv_indices=md.kv_indices[:n_kv],
        custom_mask=md.custom_mask[:n_mask],
        mask_indptr=mask_indptr,
        seq_lens=forward_batch.seq_lens,
        req_pool_indices=forward_batch.req_pool_indices,
        req_to_token=forward_batch.req_to_token_pool.req_to_token,
        positions=forward_batch.positions,
        out_cache_loc=forward_batch.out_cache_loc,
        o=o.reshape(-1, H, layer.v_head_dim),
        lse=lse,
        preset=preset,
        tp=tp,
        sm_scale=sm_scale,
        page_size=getattr(forward_batch.token_to_kv_pool, "page_size", 1),
        raw_bs=raw_bs,
        parents=parents,
        producer=producer or "sglang TritonAttnBackend.forward_extend (target verify) via mlaverify_dump",
        extra_metadata=extra,
        compact=compact,
    )


def maybe_dump_sglang(forward_batch, layer, q, k_extend, o, **kwargs):
    """from_sglang, guarded by the environment; returns the path written or None.

    MLAVERIFY_DUMP_DIR    where to write; unset or empty: do nothing (the default)
    MLAVERIFY_DUMP_LAYER  layer id to dump (default 0), or "all"
    MLAVERIFY_DUMP_SKIP   target-verify calls of that layer to let pass first (default 0)
    MLAVERIFY_DUMP_COUNT  how many calls to write after those (default 1)
    MLAVERIFY_PRESET      deepseek-v3 | kimi-k2 | kimi-k2-0905 (optional, recorded)

    Files: DIR/verify-layer{L}-call{n}-rank{r}.safetensors. Calls made while a CUDA graph is being
    captured are never dumped (copying to the host would break the capture); under CUDA-graph
    replay this Python code does not run at all, so dump with --disable-cuda-graph.
    """
    out = os.environ.get("MLAVERIFY_DUMP_DIR")
    if not out:
        return None
    if not forward_batch.forward_mode.is_target_verify() or _capturing():
        return None
    want = os.environ.get("MLAVERIFY_DUMP_LAYER", "0")
    if want != "all" and int(want) != layer.layer_id:
        return None
    n = _calls.get(layer.layer_id, 0)
    _calls[layer.layer_id] = n + 1
    skip = int(os.environ.get("MLAVERIFY_DUMP_SKIP", "0"))
    count = int(os.environ.get("MLAVERIFY_DUMP_COUNT", "1"))
    if not skip <= n < skip + count:
        return None
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"verify-layer{layer.layer_id}-call{n}-rank{_rank()}.safetensors")
    kwargs.setdefault("preset", os.environ.get("MLAVERIFY_PRESET") or None)
    from_sglang(forward_batch, layer, q, k_extend, o, path=path, **kwargs)
    return path

"""Synthesize random target-verify batches in SGLang's conventions, clean and corrupted.

    python -m mlaverify_dump.synth OUTDIR --seed S [--no-padded] [--no-corrupt]

An independent writer for mlaverify's interoperability test: it shares no code with the C++ model.
Each batch is built the way SGLang's Triton backend lays out a target-verify call (page size 1):

- trees: parent[0] = -1, parent[t] uniform in [0, t); every request of a batch has the same number
  of draft tokens D (SGLang's num_draft_tokens); positions = P + depth.
- prefixes from {0, 1, 63, 64, 65} (tile edges) and a few hundred; seq_lens = P.
- slots: a random permutation of 1..N-1 (slot 0 is never handed out) gives each request's prefix
  and draft slots; req_to_token[row, :P] = prefix slots, [P:P+D] = draft slots (out_cache_loc);
  rows are a random choice of 1..rows-1 (row 0 is the padding row); kv_indices gathers
  req_to_token[row, :P] per request (int64), kv_indptr = cumsum P (int32), qo_indptr = cumsum D
  (int32), mask_indptr = cumsum D (P + D) (int64).
- custom_mask: FULL_MASK bytes, per request [D, P + D] row-major, prefix columns true, draft column
  j of row t true iff j == t or j is an ancestor of t.
- q, the pool and k_extend: N(0, 1) rounded to bf16; k_extend rows are also written to the pool at
  out_cache_loc (SGLang's set_kv_buffer before the kernel).
- the padded batch (as SGLang pads a CUDA graph): raw_bs real requests then padded ones with
  P = 1, request row 0, slot 0 (kv_indices = req_to_token[0, 0] = 0), out_cache_loc 0 (their
  k_extend rows are what was written to slot 0), garbage positions and mask bytes, and garbage o.
- o (and lse, natural log) computed in float64 from the stored bf16 values (reference.py), o then
  rounded to bf16, lse stored as fp32.

Corrupted copies keep every input of a clean batch and replace only the server's o and lse by what
a buggy server would have produced (padded rows keep their garbage):

  rope_first_cache     every cache row (pool and k_extend) read as [k_pe (64) | c (512)]: the score
                       uses c' = row[64:576] (also V) and k_pe' = row[0:64]
  mask_indptr_shifted  request i's FULL_MASK segment read from mask_indptr[i+1] instead of
                       mask_indptr[i] (same row stride P + D, bytes past the end read as 0)
  one_element          one o element of a real request moved by 0.1 * max|o| of that request
  sm_scale_576         sm_scale = 576^-0.5 while the metadata keeps the preset's

manifest.json: {"generator", "seed", "files": [{"file", "batch", "expect": "pass" | "mismatch",
"cause", "requests", "rel_frob_vs_clean", ...}]}, see main() and python/README.md.
"""

import argparse
import json
import os
import sys

import numpy as np

from . import __version__
from ._bf16 import round_bf16
from .presets import LATENT, PRESETS, ROW
from .reference import reference_attention, rel_frobenius
from .writer import read_verify_dump, write_verify_dump

TOTAL_HEADS = {"deepseek-v3": 128, "kimi-k2": 64, "kimi-k2-0905": 64}
EDGE_PREFIXES = (0, 1, 63, 64, 65)
CORRUPTIONS = ("rope_first_cache", "mask_indptr_shifted", "one_element", "sm_scale_576")
# A corrupted request counts as "mismatch" when its o moved by more than this relative Frobenius
# distance from the clean reference: 2.5x the bf16 output rounding bound 2^-8 ~ 3.9e-3, so that a
# correct replay can never confuse it with rounding.
MISMATCH_REL_FROB = 1e-2


def random_tree(rng, D):
    return [-1] + [int(rng.integers(0, t)) for t in range(1, D)]


def tree_depths(parents):
    depth = []
    for t, p in enumerate(parents):
        depth.append(0 if p < 0 else depth[p] + 1)
    return depth


def tree_visibility(parents):
    D = len(parents)
    vis = np.zeros((D, D), dtype=bool)
    for t in range(D):
        j = t
        while j != -1:
            vis[t, j] = True
            j = parents[j]
    return vis


def build_batch(rng, *, preset, H, prefixes, D, pad_to=None):
    """One verify batch as the tensors SGLang hands its Triton kernel (o, lse not yet computed)."""
    raw_bs = len(prefixes)
    bs = raw_bs if pad_to is None else pad_to
    P = list(prefixes) + [1] * (bs - raw_bs)  # padded requests: P = 1
    trees = [random_tree(rng, D) for _ in range(raw_bs)]

    need = sum(prefixes) + raw_bs * D  # slots handed out to real requests
    spare = int(rng.integers(8, 64))  # free slots that stay in the pool unreferenced
    N = 1 + need + spare
    perm = rng.permutation(np.arange(1, N, dtype=np.int64))
    rows = raw_bs + 1 + int(rng.integers(0, 4))  # row 0 reserved, some rows unused
    max_len = max(p + D for p in P) + int(rng.integers(0, 16))
    req_to_token = np.zeros((rows, max_len), dtype=np.int32)
    rpi = np.zeros(bs, dtype=np.int64)
    rpi[:raw_bs] = rng.choice(np.arange(1, rows), size=raw_bs, replace=False)

    pool = round_bf16(rng.standard_normal((N, ROW)))
    T = bs * D
    q = round_bf16(rng.standard_normal((T, H, ROW)))
    k_extend = round_bf16(rng.standard_normal((T, ROW)))
    out_cache_loc = np.zeros(T, dtype=np.int64)
    positions = np.zeros(T, dtype=np.int64)
    masks = []
    cur = 0
    for i in range(bs):
        if i < raw_bs:
            pre = perm[cur:cur + P[i]]
            drf = perm[cur + P[i]:cur + P[i] + D]
            cur += P[i] + D
            req_to_token[rpi[i], :P[i]] = pre
            req_to_token[rpi[i], P[i]:P[i] + D] = drf
            out_cache_loc[i * D:(i + 1) * D] = drf
            positions[i * D:(i + 1) * D] = P[i] + np.array(tree_depths(trees[i]))
            m = np.ones((D, P[i] + D), dtype=bool)
            m[:, P[i]:] = tree_visibility(trees[i])
        else:  # CUDA-graph padding: row 0, slot 0, stale bytes
            positions[i * D:(i + 1) * D] = rng.integers(0, 4096, size=D)
            m = rng.integers(0, 2, size=(D, P[i] + D)).astype(bool)
        masks.append(m.ravel())
    if bs > raw_bs:
        # every padded token writes its k row to slot 0; all of them are what slot 0 now holds
        k_extend[raw_bs * D:] = k_extend[raw_bs * D]
    pool[out_cache_loc] = k_extend  # set_kv_buffer(out_cache_loc, k) before the kernel
    kv_indices = np.concatenate(
        [req_to_token[rpi[i], :P[i]].astype(np.int64) for i in range(bs)])
    seq = np.array(P, dtype=np.int64)
    kv_indptr = np.concatenate([[0], np.cumsum(seq)]).astype(np.int32)
    qo_indptr = (np.arange(bs + 1) * D).astype(np.int32)
    mask_indptr = np.concatenate([[0], np.cumsum(D * (seq + D))]).astype(np.int64)
    return {
        "q": q, "kv_buffer": pool.reshape(N, 1, ROW), "k_extend": k_extend.reshape(T, 1, ROW),
        "qo_indptr": qo_indptr, "kv_indptr": kv_indptr, "kv_indices": kv_indices,
        "custom_mask": np.concatenate(masks), "mask_indptr": mask_indptr, "seq_lens": seq,
        "req_pool_indices": rpi, "req_to_token": req_to_token, "positions": positions,
        "out_cache_loc": out_cache_loc,
    }, {"preset": preset, "tp": TOTAL_HEADS[preset] // H, "sm_scale": PRESETS[preset],
        "raw_bs": raw_bs, "parents": trees}


def batch_plan(rng, padded=True):
    """The batches of one run: fixed coverage (tile-edge prefixes, a long tree, D = 1, padding)
    with every other choice drawn from the seed."""
    presets = sorted(PRESETS)

    def hundreds(k):
        return [int(x) for x in rng.integers(100, 400, size=k)]

    def order(prefixes):
        prefixes = [int(p) for p in rng.permutation(prefixes)]
        # keep P = 0 away from the last slot: under the shifted-mask reading the last request reads
        # past the end of custom_mask (all zeros), and with no prefix it would see no key at all
        if prefixes[-1] == 0 and len(prefixes) > 1:
            prefixes[0], prefixes[-1] = prefixes[-1], prefixes[0]
        return prefixes

    plan = [
        ("edges", dict(preset=presets[int(rng.integers(3))], H=16,
                       prefixes=order(list(EDGE_PREFIXES) + hundreds(1)), D=8)),
        ("long", dict(preset=presets[int(rng.integers(3))], H=8,
                      prefixes=order(hundreds(2) + [int(rng.integers(0, 66))]), D=16)),
        ("chain1", dict(preset=presets[int(rng.integers(3))], H=int(rng.choice([8, 16])),
                        prefixes=order([64, int(rng.integers(1, 300))]), D=1)),
        ("mixed", dict(preset=presets[int(rng.integers(3))], H=int(rng.choice([8, 16])),
                       prefixes=order([int(rng.choice(EDGE_PREFIXES + (int(rng.integers(100, 400)),)))
                                       for _ in range(int(rng.integers(2, 6)))]),
                       D=int(rng.choice([2, 4, 5, 7, 12])))),
    ]
    if padded:
        plan.append(("padded", dict(preset="kimi-k2", H=8,
                                    prefixes=order([int(rng.integers(100, 300)),
                                                    int(rng.integers(1, 66))]),
                                    D=5, pad_to=4)))
    return plan


def _real_rows(t, raw_bs):
    return int(t["qo_indptr"][raw_bs])


def _server_output(rng, t, meta, o64, lse64):
    """Round the reference as a bf16-out kernel would; padded rows get garbage."""
    T = t["q"].shape[0]
    real = _real_rows(t, meta["raw_bs"])
    o = round_bf16(o64)
    lse = lse64.astype(np.float32)
    if real < T:
        o[real:] = round_bf16(rng.standard_normal((T - real, o.shape[1], LATENT)) * 3.0)
        lse[real:] = rng.standard_normal((T - real, lse.shape[1])).astype(np.float32) * 10
    return o, lse


def _write(path, t, meta, o, lse, seed):
    write_verify_dump(path, **t, o=o, lse=lse, preset=meta["preset"], tp=meta["tp"],
                      sm_scale=meta["sm_scale"], page_size=1, raw_bs=meta["raw_bs"],
                      parents=meta["parents"], float_dtype="bf16",
                      producer=f"mlaverify_dump.synth {__version__} seed {seed}")


def corrupted_output(rng, cause, t, meta, o_clean, lse_clean):
    """-> (o, lse, extra manifest fields) a server with this bug would have returned."""
    raw_bs = meta["raw_bs"]
    real = list(range(raw_bs))
    sm = meta["sm_scale"]
    o, lse = o_clean.copy(), lse_clean.copy()
    extra = {}
    if cause == "one_element":
        qo = t["qo_indptr"]
        i = int(rng.integers(raw_bs))
        a, b = int(qo[i]), int(qo[i + 1])
        tok = int(rng.integers(b - a))
        h = int(rng.integers(o.shape[1]))
        c = int(rng.integers(LATENT))
        delta = 0.1 * float(np.abs(o_clean[a:b]).max()) * (1 if rng.integers(2) else -1)
        o[a + tok, h, c] = round_bf16(np.array([o[a + tok, h, c] + delta]))[0]
        # token: the row of o (global, as mlaverify reports it); token_in_request: 0..D-1
        extra["where"] = {"request": i, "token": a + tok, "head": h, "column": c,
                          "token_in_request": tok}
        extra["delta"] = float(o[a + tok, h, c] - o_clean[a + tok, h, c])
        return o, lse, extra
    if cause == "rope_first_cache":
        o64, lse64 = reference_attention(t, sm, rope_first=True, requests=real)
    elif cause == "sm_scale_576":
        o64, lse64 = reference_attention(t, ROW ** -0.5, requests=real)
    elif cause == "mask_indptr_shifted":
        starts = np.asarray(t["mask_indptr"], dtype=np.int64)[1:]
        o64, lse64 = reference_attention(t, sm, mask_starts=starts, requests=real)
    else:
        raise ValueError(cause)
    n = _real_rows(t, raw_bs)
    o[:n] = round_bf16(o64[:n])
    lse[:n] = lse64[:n].astype(np.float32)
    extra["empty_rows"] = int(np.isinf(lse64[:n]).any(axis=1).sum())
    return o, lse, extra


def synthesize(outdir, seed, padded=True, corrupt=True):
    rng = np.random.default_rng(seed)
    os.makedirs(outdir, exist_ok=True)
    files = []
    for name, spec in batch_plan(rng, padded):
        t, meta = build_batch(rng, **spec)
        o64, lse64 = reference_attention(t, meta["sm_scale"], requests=range(meta["raw_bs"]))
        o, lse = _server_output(rng, t, meta, o64, lse64)
        qo = t["qo_indptr"]
        base = {"batch": name, "preset": meta["preset"], "heads": int(t["q"].shape[1]),
                "bs": int(qo.shape[0] - 1), "raw_bs": meta["raw_bs"],
                "draft_tokens": int(qo[1] - qo[0]),
                "prefixes": [int(x) for x in np.diff(t["kv_indptr"])[:meta["raw_bs"]]]}
        fname = f"{name}.safetensors"
        _write(os.path.join(outdir, fname), t, meta, o, lse, seed)
        files.append({"file": fname, **base, "expect": "pass", "cause": "none",
                      "requests": []})
        if not corrupt:
            continue
        for cause in CORRUPTIONS:
            oc, lc, extra = corrupted_output(rng, cause, t, meta, o, lse)
            rel = [rel_frobenius(oc[qo[i]:qo[i + 1]], o[qo[i]:qo[i + 1]])
                   for i in range(meta["raw_bs"])]
            if cause == "one_element":
                bad = [extra["where"]["request"]]
            else:
                bad = [i for i, r in enumerate(rel) if r > MISMATCH_REL_FROB]
            if not bad:
                # this reading happens to give the same output on this batch (e.g. D = 1 and the
                # shifted mask lands on visible bytes): nothing to detect, so no file
                continue
            fname = f"{name}.{cause}.safetensors"
            _write(os.path.join(outdir, fname), t, meta, oc, lc, seed)
            entry = {"file": fname, **base, "expect": "mismatch", "cause": cause,
                     "requests": bad, "rel_frob_vs_clean": [float(f"{r:.4g}") for r in rel],
                     **extra}
            # requests whose o moved, but by no more than MISMATCH_REL_FROB: a replay may or may
            # not flag them (every other request not in "requests" has the clean bits exactly)
            unsure = [i for i, r in enumerate(rel) if 0 < r <= MISMATCH_REL_FROB
                      and i not in bad]
            if unsure:
                entry["uncertain"] = unsure
            files.append(entry)
    manifest = {"generator": f"mlaverify_dump.synth {__version__}", "seed": seed,
                "mismatch_rel_frob": MISMATCH_REL_FROB, "files": files}
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def corrupt_dump(src, outdir, seed=1):
    """Writes the corrupted copies of an existing dump (say one of the shipped SGLang dumps): its
    inputs and metadata unchanged, its real rows' o replaced by what a server with each bug would
    have returned (padded rows keep the server's own bytes). Returns a manifest like synthesize's,
    the clean source first."""
    rng = np.random.default_rng(seed)
    os.makedirs(outdir, exist_ok=True)
    tensors, _, md = read_verify_dump(src)
    t = {k: v for k, v in tensors.items() if k not in ("o", "lse")}
    qo = np.asarray(t["qo_indptr"])
    bs = int(qo.shape[0] - 1)
    meta = {"preset": md.get("preset"), "tp": int(md["tp"]) if "tp" in md else None,
            "sm_scale": float(md["sm_scale"]), "raw_bs": int(md.get("raw_bs", bs)),
            "parents": json.loads(md["parents"]) if "parents" in md else None}
    o = np.asarray(tensors["o"], dtype=np.float64)
    lse = np.asarray(tensors["lse"], dtype=np.float32) if "lse" in tensors else None
    stem = os.path.splitext(os.path.basename(src))[0]
    files = [{"file": os.path.abspath(src), "expect": "pass", "cause": "none", "requests": []}]
    lse_in = lse if lse is not None else np.zeros(o.shape[:2], dtype=np.float32)
    for cause in CORRUPTIONS:
        oc, lc, extra = corrupted_output(rng, cause, t, meta, o, lse_in)
        rel = [rel_frobenius(oc[qo[i]:qo[i + 1]], o[qo[i]:qo[i + 1]])
               for i in range(meta["raw_bs"])]
        bad = ([extra["where"]["request"]] if cause == "one_element"
               else [i for i, r in enumerate(rel) if r > MISMATCH_REL_FROB])
        if not bad:
            continue
        fname = f"{stem}.{cause}.safetensors"
        write_verify_dump(os.path.join(outdir, fname), **t, o=oc,
                          lse=lc if lse is not None else None, preset=meta["preset"],
                          tp=meta["tp"], sm_scale=meta["sm_scale"],
                          page_size=int(md.get("page_size", 1)), raw_bs=meta["raw_bs"],
                          parents=meta["parents"], float_dtype="bf16",
                          producer=f"mlaverify_dump.synth {__version__}: {cause} copy of {stem}")
        entry = {"file": fname, "expect": "mismatch", "cause": cause, "requests": bad, **extra}
        unsure = [i for i, r in enumerate(rel) if 0 < r <= MISMATCH_REL_FROB and i not in bad]
        if unsure:
            entry["uncertain"] = unsure
        files.append(entry)
    return {"generator": f"mlaverify_dump.synth {__version__}", "seed": seed, "source": src,
            "files": files}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m mlaverify_dump.synth",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-padded", action="store_true", help="leave out the CUDA-graph-padded batch")
    ap.add_argument("--no-corrupt", action="store_true", help="write only the clean batches")
    args = ap.parse_args(argv)
    m = synthesize(args.outdir, args.seed, padded=not args.no_padded, corrupt=not args.no_corrupt)
    for e in m["files"]:
        print(f"{e['file']}: expect {e['expect']}" + ("" if e["cause"] == "none" else
              f" ({e['cause']}, requests {e['requests']})"))
    print(f"{len(m['files'])} files and manifest.json in {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

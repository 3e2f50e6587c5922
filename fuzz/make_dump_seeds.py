#!/usr/bin/env python3
"""Writes the dump fuzzer's seed corpus (fuzz/seeds/dump/) by slimming the shipped SGLang dumps
(scenarios/dumps/*.safetensors, 0.7 and 1.5 MB: a few executions a second under the sanitizers)
down to a few requests, one head, a short prefix and a few draft nodes, in every dtype and
variant the loader accepts (k_extend or the unified path, latent- or rope-first, CSR or
offsets-only mask_indptr, preset or sm_scale, lse present). Kept as committed files; rerun after a
format change: python3 fuzz/make_dump_seeds.py. Standard library only."""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds", "dump")
FMT = {"BOOL": "B", "U8": "B", "I8": "b", "I16": "h", "U16": "H", "I32": "i", "U32": "I",
       "I64": "q", "U64": "Q", "F32": "f"}


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    data = b[8 + n:]
    t = {}
    for name, e in h.items():
        a, z = e["data_offsets"]
        t[name] = (e["dtype"], e["shape"], data[a:z])
    return meta, t


def ints(tensor):
    dt, _, raw = tensor
    f = FMT[dt]
    return list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(f), f), raw))


def bf16_rows(tensor, width):
    """bf16 tensor -> list of rows of `width` raw 2-byte elements."""
    raw = tensor[2]
    return [raw[k:k + 2 * width] for k in range(0, len(raw), 2 * width)]


def bf16_to_f32(raw):
    out = bytearray()
    for k in range(0, len(raw), 2):
        out += b"\0\0" + raw[k:k + 2]
    return bytes(out)


def f32_to_f16(raw):
    vals = struct.unpack("<%df" % (len(raw) // 4), raw)
    return struct.pack("<%de" % len(vals), *[max(-65504.0, min(65504.0, v)) for v in vals])


def floats(raw_bf16, dtype):
    if dtype == "BF16":
        return raw_bf16
    f32 = bf16_to_f32(raw_bf16)
    return f32 if dtype == "F32" else f32_to_f16(f32)


def pack(vals, dtype):
    return struct.pack("<%d%s" % (len(vals), FMT[dtype]), *vals)


def write(path, meta, tensors):
    header = {"__metadata__": meta} if meta else {}
    off = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode())
        for _, _, _, raw in tensors:
            f.write(raw)
    return os.path.getsize(path)


def slim(src, requests, heads=(0,), max_prefix=None, max_draft=None, real=None, float_dtype="BF16",
         int_dtype=None, mask_dtype=None, k_extend=True, rope_first=False, offsets_only=False,
         preset=True, lse=False, keep_o=True):
    meta, t = read(src)
    H = t["q"][1][1]
    qo, kvp, kvi = ints(t["qo_indptr"]), ints(t["kv_indptr"]), ints(t["kv_indices"])
    ocl, mip, pos = ints(t["out_cache_loc"]), ints(t["mask_indptr"]), ints(t["positions"])
    mask = ints(t["custom_mask"])
    raw_bs = int(meta.get("raw_bs", len(qo) - 1))
    parents = json.loads(meta["parents"]) if "parents" in meta else []
    q_rows = bf16_rows(t["q"], 576)          # [T * H] rows
    o_rows = bf16_rows(t["o"], 512)
    kv_rows = bf16_rows(t["kv_buffer"], 576)
    ke_rows = bf16_rows(t["k_extend"], 576)

    slots, slot_of = [], {}

    def slot(s):
        if s not in slot_of:
            slot_of[s] = len(slots)
            slots.append(s)
        return slot_of[s]

    n_qo, n_kvp, n_kvi, n_ocl, n_mip, n_pos, n_mask = [0], [0], [], [], [0], [], []
    q_out, o_out, ke_out, rtt, new_parents = [], [], [], [], []
    for i in requests:
        P, D = kvp[i + 1] - kvp[i], qo[i + 1] - qo[i]
        P2 = P if max_prefix is None else min(P, max_prefix)
        D2 = D if max_draft is None else min(D, max_draft)
        pre = [slot(s) for s in kvi[kvp[i]:kvp[i] + P2]]
        dr = [slot(s) for s in ocl[qo[i]:qo[i] + D2]]
        n_kvi += pre
        n_kvp.append(len(n_kvi))
        n_ocl += dr
        n_qo.append(n_qo[-1] + D2)
        for r in range(D2):
            row = mask[mip[i] + r * (P + D):mip[i] + (r + 1) * (P + D)]
            n_mask += row[:P2] + row[P:P + D2]
            tok = qo[i] + r
            n_pos.append(pos[tok] - (P - P2))
            for h in heads:
                q_out.append(q_rows[tok * H + h])
                o_out.append(o_rows[tok * H + h])
            ke_out.append(ke_rows[tok])
        n_mip.append(len(n_mask))
        rtt.append(pre + dr)
        if i < raw_bs:
            new_parents.append(parents[i][:D2])
    bs, T, nh = len(requests), n_qo[-1], len(heads)
    real = len(new_parents) if real is None else real
    width = max(len(r) for r in rtt)
    rtt_flat = [s for r in rtt for s in r + [0] * (width - len(r))]

    def swap(row):  # latent-first [c | k_pe] -> rope-first [k_pe | c]
        return row[1024:] + row[:1024] if rope_first else row

    pool = b"".join(swap(kv_rows[s]) for s in slots)
    it = int_dtype or {}
    idt = lambda name, orig: it.get(name, orig) if isinstance(it, dict) else it
    m = {"layout": "rope-first" if rope_first else "latent-first", "heads": str(nh),
         "raw_bs": str(real), "bs": str(bs), "page_size": "1",
         "draft_tokens": str(max(n_qo[k + 1] - n_qo[k] for k in range(bs)))}
    if preset:
        m["preset"] = meta["preset"]
    m["sm_scale"] = meta["sm_scale"]
    if new_parents and real == len(new_parents):
        m["parents"] = json.dumps(new_parents)
    fd = float_dtype
    tensors = [
        ("q", fd, [T, nh, 576], floats(b"".join(q_out), fd)),
        ("kv_buffer", fd, [len(slots), 1, 576], floats(pool, fd)),
        ("qo_indptr", idt("qo_indptr", "I32"), [bs + 1], pack(n_qo, idt("qo_indptr", "I32"))),
        ("kv_indptr", idt("kv_indptr", "I32"), [bs + 1], pack(n_kvp, idt("kv_indptr", "I32"))),
        ("kv_indices", idt("kv_indices", "I64"), [len(n_kvi)], pack(n_kvi, idt("kv_indices", "I64"))),
        ("out_cache_loc", idt("out_cache_loc", "I64"), [T], pack(n_ocl, idt("out_cache_loc", "I64"))),
        ("custom_mask", mask_dtype or "BOOL", [len(n_mask)], pack(n_mask, mask_dtype or "BOOL")),
        ("mask_indptr", idt("mask_indptr", "I64"), [bs] if offsets_only else [bs + 1],
         pack(n_mip[:-1] if offsets_only else n_mip, idt("mask_indptr", "I64"))),
        ("seq_lens", idt("seq_lens", "I64"), [bs], pack(n_kvp and [n_kvp[k + 1] - n_kvp[k] for k in range(bs)], idt("seq_lens", "I64"))),
        ("positions", idt("positions", "I64"), [T], pack(n_pos, idt("positions", "I64"))),
        ("req_pool_indices", idt("req_pool_indices", "I64"), [bs], pack(list(range(bs)), idt("req_pool_indices", "I64"))),
        ("req_to_token", idt("req_to_token", "I32"), [bs, width], pack(rtt_flat, idt("req_to_token", "I32"))),
    ]
    if k_extend:
        tensors.append(("k_extend", fd, [T, 1, 576], floats(b"".join(swap(r) for r in ke_out), fd)))
    if keep_o:
        tensors.append(("o", fd, [T, nh, 512], floats(b"".join(o_out), fd)))
    if lse:
        tensors.append(("lse", "F32", [T, nh], pack([1.0] * (T * nh), "F32")))
    return m, tensors


def main():
    os.makedirs(OUT, exist_ok=True)
    eagle = os.path.join(ROOT, "scenarios", "dumps", "k2_eagle16.safetensors")
    padded = os.path.join(ROOT, "scenarios", "dumps", "k2_padded.safetensors")
    seeds = {
        # One real request, one head, everything as the server gave it: replays green.
        "eagle_r3_h2": slim(eagle, [3], heads=(2,)),
        # Real and CUDA-graph padded rows, shortened prefixes.
        "padded_r1_r2_r3_p4": slim(padded, [1, 2, 3], max_prefix=4),
        "eagle_r0_r1_p3_d6": slim(eagle, [0, 1], max_prefix=3, max_draft=6, heads=(0, 5)),
        # The unified path (no k_extend), rope-first rows, offsets-only mask_indptr, no preset.
        "padded_r0_unified_rope_offsets": slim(padded, [0, 3], max_prefix=6, k_extend=False,
                                               rope_first=True, offsets_only=True, preset=False),
        # Other storage: fp32 and fp16 floats, narrow and unsigned ints, u8 mask, lse present.
        "eagle_r2_f32_i16_lse": slim(eagle, [2], max_prefix=5, max_draft=4, float_dtype="F32",
                                     int_dtype="I16", mask_dtype="U8", lse=True),
        "padded_r1_f16_u8": slim(padded, [1], max_prefix=3, float_dtype="F16", int_dtype="U8",
                                 mask_dtype="I32"),
        "eagle_r1_u32_i64": slim(eagle, [1], max_prefix=2, max_draft=3,
                                 int_dtype={"qo_indptr": "U32", "kv_indptr": "I64",
                                            "kv_indices": "U64", "out_cache_loc": "I32",
                                            "mask_indptr": "U16", "req_to_token": "I8"}),
        # Smallest: one token, one prefix slot, no outputs (a dump written before the call).
        "tiny_no_o": slim(padded, [0], max_prefix=1, max_draft=1, keep_o=False),
    }
    for name, (meta, tensors) in seeds.items():
        size = write(os.path.join(OUT, name + ".safetensors"), meta, tensors)
        print("%-34s %7d bytes" % (name, size))


if __name__ == "__main__":
    sys.exit(main())

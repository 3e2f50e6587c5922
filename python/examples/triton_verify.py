"""A Triton MLA tree-verify kernel, as an mlaverify backend on the GPU.

One program per (real query token, head) walks the request's keys (the prefix slots, then the
draft rows) in tiles of BLOCK_N with an online softmax in fp32, c and k_pe read through the pool's
layout (offsets and strides: any kind), and writes o_lat[t, h, :512] and lse[t, h]. The host
wrapper turns the metadata into two flat buffers the kernel indexes (mlaverify.metadata reads
every kv_indexing and mask format): the pool slot of every kv entry, and each request's draft
block as D_i x D_i bytes. The suite hands it a TorchBatch (torch_batch.py).

    python examples/triton_verify.py [cases] [seed]   # fuzz it on the GPU (triton, torch, the .so)
"""

import sys

import numpy as np
import torch
import triton
import triton.language as tl

import mlaverify as mv
from mlaverify import metadata as md

BLOCK_N = 16

CAPABILITIES = mv.Capabilities(
    mask_formats={"full", "qlen_only", "qlen_only_bitpacking", "flashinfer_packed", "draft_bits"},
    mask_indptr_conventions={"csr", "offsets_only"}, kv_layouts={"latent_first", "rope_first",
                                                                 "split"},
    kv_indexings={"token_i64", "token_i32", "page_table"},
    draft_sources={"extend_rows", "cache_slots"}, writes_lse=True,
    # Operands widened exactly; fp32 sums and P; tl.exp is ex2.approx of x*log2(e) (2^-20 covers
    # the argument's rounding); the running sums are rescaled every BLOCK_N keys.
    operand_unit=0.0, accumulate_unit=2.0**-23, p_unit=2.0**-24, exp_unit=2.0**-20,
    tile_keys=BLOCK_N)


# Strides, offsets and H vary from case to case: not specialized on (== 1, % 16), so a campaign
# compiles one kernel per dtype and path instead of one per stride pattern.
@triton.jit(do_not_specialize=["q_ts", "q_hs", "q_lat_off", "q_pe_off", "lat_off", "lat_stride",
                               "rope_off", "rope_stride", "ext_stride", "o_ts", "o_hs", "H"])
def _verify_kernel(q_ptr, q_ts, q_hs, q_lat_off, q_pe_off,
                   pool_ptr, lat_off, lat_stride, rope_off, rope_stride, ext_ptr, ext_stride,
                   qo_ptr, req_ptr, slot_begin_ptr, prefix_ptr, slots_ptr, vis_begin_ptr,
                   vis_ptr, o_ptr, o_ts, o_hs, lse_ptr, H, sm_scale,
                   CACHE_SLOTS: tl.constexpr, NO_DIAGONAL: tl.constexpr, O_BF16: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.load(req_ptr + t)                    # the request of token t
    q0 = tl.load(qo_ptr + i)
    d = tl.load(qo_ptr + i + 1) - q0
    row = t - q0                                # t's draft node within the request
    p = tl.load(prefix_ptr + i)                 # P_i
    n = p + d
    s0 = tl.load(slot_begin_ptr + i)            # slots[s0 + k]: pool slot of kv entry k
    v0 = tl.load(vis_begin_ptr + i) + row * d   # vis[v0 + j]: t sees draft node j

    k512 = tl.arange(0, 512)
    k64 = tl.arange(0, 64)
    q_row = q_ptr + t.to(tl.int64) * q_ts + h * q_hs
    q_lat = tl.load(q_row + q_lat_off + k512).to(tl.float32)
    q_pe = tl.load(q_row + q_pe_off + k64).to(tl.float32)

    # Loop-carried scalars as fp32 tensors (a literal would be a constexpr of another type).
    m = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), axis=0)
    l = tl.sum(tl.zeros([BLOCK_N], dtype=tl.float32), axis=0)
    acc = tl.zeros([512], dtype=tl.float32)
    for start in range(0, n, BLOCK_N):
        j = start + tl.arange(0, BLOCK_N)
        valid = j < n
        prefix = j < p
        from_pool = valid & prefix
        if CACHE_SLOTS:
            from_pool = valid
        slot = tl.load(slots_ptr + s0 + j, mask=from_pool, other=0)
        ext_row = (q0 + j - p).to(tl.int64)     # k_extend row of draft node j - p
        c_pool = pool_ptr + (lat_off + slot * lat_stride)[:, None] + k512[None, :]
        r_pool = pool_ptr + (rope_off + slot * rope_stride)[:, None] + k64[None, :]
        c_ext = ext_ptr + (ext_row * ext_stride)[:, None] + k512[None, :]
        r_ext = ext_ptr + (ext_row * ext_stride + 512)[:, None] + k64[None, :]
        c = tl.load(tl.where(from_pool[:, None], c_pool, c_ext), mask=valid[:, None],
                    other=0.0).to(tl.float32)                             # [BLOCK_N, 512]
        k_pe = tl.load(tl.where(from_pool[:, None], r_pool, r_ext), mask=valid[:, None],
                       other=0.0).to(tl.float32)                          # [BLOCK_N, 64]
        s = (tl.sum(c * q_lat[None, :], axis=1) + tl.sum(k_pe * q_pe[None, :], axis=1)) * sm_scale
        draft = valid & (j >= p)
        sees = tl.load(vis_ptr + v0 + (j - p), mask=draft, other=0) != 0
        if NO_DIAGONAL:  # the tests' planted bug: a node does not see itself (spec §7 class 6)
            sees = sees & ((j - p) != row)
        s = tl.where(valid & (prefix | sees), s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        # Until a key is visible m_new is -inf: shift by 0 so that -inf - -inf never occurs.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_use)
        w = tl.exp(s - m_use)
        l = l * alpha + tl.sum(w, axis=0)
        acc = acc * alpha + tl.sum(w[:, None] * c, axis=0)
        m = m_new
    live = l > 0
    o = tl.where(live, acc / tl.where(live, l, 1.0), 0.0)
    if O_BF16:  # round to nearest even, as the model's output rounding (and cvt.rn) does
        o = o.to(tl.bfloat16, fp_downcast_rounding="rtne")
    tl.store(o_ptr + t.to(tl.int64) * o_ts + h * o_hs + k512, o)
    lse = tl.where(live, m + tl.log(tl.where(live, l, 1.0)), float("-inf"))
    tl.store(lse_ptr + t * H + h, lse)


def flat_metadata(h):
    """Host numpy: per token its request; per request P_i, where its slots and its draft block
    start; every kv entry's pool slot; every draft block [D_i, D_i] as bytes."""
    bs = h.batch_size
    req, prefix, slot_begin, vis_begin, slots, vis = [], [], [], [], [], []
    n_slots = n_vis = 0
    for i in range(bs):
        q0, d, _, p = md.extent(h, i)
        req.append(np.full(d, i, np.int32))
        prefix.append(p)
        slot_begin.append(n_slots)
        vis_begin.append(n_vis)
        s = md.kv_slots(h, i, 0, p + (d if h.draft_source == "cache_slots" else 0))
        slots.append(s)
        n_slots += len(s)
        vis.append(md.draft_block(h, i).astype(np.uint8).reshape(-1))
        n_vis += d * d
    cat = lambda parts, dt: np.concatenate(parts + [np.zeros(1, dt)]).astype(dt)  # never empty
    return (cat(req, np.int32), np.array(prefix, np.int64), np.array(slot_begin, np.int64),
            cat(slots, np.int64), np.array(vis_begin, np.int64), cat(vis, np.uint8))


def verify(b, no_diagonal=False):
    h = b.host
    T = h.total_q
    if T == 0:
        return
    dev = lambda a: torch.from_numpy(a).to(b.device)
    req, prefix, slot_begin, slots, vis_begin, vis = map(dev, flat_metadata(h))
    L = b.kv_layout
    cache = h.draft_source == "cache_slots"
    ext = b.kv_pool if cache else b.k_extend
    _verify_kernel[(T, b.num_heads)](
        b.q, b.q_token_stride, b.q_head_stride, b.q_latent_offset, b.q_rope_offset,
        b.kv_pool, L.latent_offset, L.latent_stride, L.rope_offset, L.rope_stride,
        ext, b.k_extend_stride, b.qo_indptr, req, slot_begin, prefix, slots, vis_begin, vis,
        b.o_lat, b.o_token_stride, b.o_head_stride, b.lse, b.num_heads, float(b.sm_scale),
        CACHE_SLOTS=cache, NO_DIAGONAL=no_diagonal, O_BF16=h.o_dtype == "bf16",
        BLOCK_N=BLOCK_N)


def backend(name="triton-verify", device="cuda", no_diagonal=False):
    return mv.PythonBackend(lambda b: verify(b, no_diagonal), name=name,
                            capabilities=CAPABILITIES, device=device)


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261201
    report = mv.fuzz(backend(), cases=cases, seed=seed)
    print(report)
    sys.exit(report.exit_code)

"""A plain numpy MLA tree-verify implementation, as an mlaverify backend.

It reads the batch the way a kernel does: qo_indptr / kv_indptr for each request's extent, the
pool slots of its kv entries (kv_indices, int32 indices or a page table), c and k_pe through the
pool's layout, the draft rows from k_extend (or from the cache: the unified path), the draft
block's visibility from the mask in whatever format it comes (mlaverify.metadata does the
decoding), and writes o_lat [T, H, 512] and lse [T, H] (natural log) for the real rows only. It
computes in float64 from the stored values. CAPABILITIES declares exactly that.

    python examples/numpy_verify.py [cases] [seed]      # fuzz it (needs libmlaverify_c.so)
"""

import sys

import numpy as np

import mlaverify as mv
from mlaverify import metadata as md
from mlaverify.bf16 import store, to_float32

CAPABILITIES = mv.Capabilities(
    mask_formats={"full", "qlen_only", "qlen_only_bitpacking", "flashinfer_packed", "draft_bits"},
    mask_indptr_conventions={"csr", "offsets_only"}, kv_dtypes={"bf16", "f32"},
    kv_layouts={"latent_first", "rope_first", "split"},
    kv_indexings={"token_i64", "token_i32", "page_table"},
    draft_sources={"extend_rows", "cache_slots"}, writes_lse=True, deterministic=True,
    # float64 from the stored values: no operand rounding, and every sum, P and exp at least as
    # exact as fp32 (declared as fp32: a bound the double arithmetic stays far inside).
    operand_unit=0.0, accumulate_unit=2.0**-24, p_unit=2.0**-24, exp_unit=2.0**-24)


def verify(b, draft_block=md.draft_block, sm_scale=None):
    """Writes b.o_lat and b.lse for every real row of the numpy Batch b."""
    scale = np.float64(b.sm_scale if sm_scale is None else sm_scale)
    for i in range(b.batch_size):
        q0, d, _, p = md.extent(b, i)
        if d == 0:
            continue
        c, k_pe = md.rows(b, md.kv_slots(b, i, 0, p))  # the prefix
        if b.draft_source == "cache_slots":
            dc, dk = md.rows(b, md.kv_slots(b, i, p, d))
        else:  # k_extend rows are latent-first [c | k_pe]
            ext = to_float32(b.k_extend[q0:q0 + d]).astype(np.float64)
            dc, dk = ext[:, :512], ext[:, 512:]
        c, k_pe = np.concatenate([c, dc]), np.concatenate([k_pe, dk])  # [P + D, 512], [.., 64]
        H = b.num_heads  # the D * H (node, head) pairs are the rows of one GEMM (MQA)
        q_lat = to_float32(b.q_lat[q0:q0 + d]).reshape(d * H, 512).astype(np.float64)
        q_pe = to_float32(b.q_pe[q0:q0 + d]).reshape(d * H, 64).astype(np.float64)
        scores = (scale * (q_lat @ c.T + q_pe @ k_pe.T)).reshape(d, H, p + d)
        visible = np.ones((d, p + d), dtype=bool)  # every prefix column is visible
        visible[:, p:] = draft_block(b, i)
        scores = np.where(visible[:, None, :], scores, -np.inf)        # [D, H, P + D]
        m = scores.max(axis=-1, keepdims=True)
        live = np.isfinite(m)  # a row that sees no key: zeros and lse = -inf
        w = np.where(live, np.exp(scores - np.where(live, m, 0.0)), 0.0)
        s = w.sum(axis=-1, keepdims=True)
        o = (w.reshape(d * H, p + d) @ c).reshape(d, H, 512)
        store(b.o_lat[q0:q0 + d], np.where(live, o / np.where(live, s, 1.0), 0.0))
        lse = np.where(live, m + np.log(np.where(live, s, 1.0)), -np.inf)[..., 0]
        b.lse[q0:q0 + d] = lse.astype(np.float32)


def backend(name="numpy-verify", **bugs):
    """The backend; bugs (draft_block=..., sm_scale=...) replace a part, for planted-bug tests."""
    return mv.PythonBackend(lambda b: verify(b, **bugs), name=name, capabilities=CAPABILITIES)


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261201
    report = mv.fuzz(backend(), cases=cases, seed=seed)
    print(report)
    sys.exit(report.exit_code)

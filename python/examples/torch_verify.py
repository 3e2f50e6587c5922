"""A plain PyTorch MLA tree-verify implementation, as an mlaverify backend on the GPU.

The suite hands it a TorchBatch: every buffer of the launch as a CUDA tensor (bf16 stays
torch.bfloat16) with the numpy Batch's names, strides and offsets, and `host`, the numpy Batch
itself. The metadata is read on the host (mlaverify.metadata: extents, the pool slots under any
kv_indexing, the draft block under any mask format), the math on the device in float32: gather c
and k_pe through the pool's layout, scores, masked softmax, P.V, o_lat and lse written in place.

    python examples/torch_verify.py [cases] [seed]   # fuzz it on the GPU (torch, CUDA, the .so)
"""

import sys

import torch

import mlaverify as mv
from mlaverify import metadata as md

# fp32 matmuls really in fp32: TF32 (10-bit mantissa) would be another kernel than declared.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

CAPABILITIES = mv.Capabilities(
    mask_formats={"full", "qlen_only", "qlen_only_bitpacking", "flashinfer_packed", "draft_bits"},
    mask_indptr_conventions={"csr", "offsets_only"}, kv_layouts={"latent_first", "rope_first",
                                                                 "split"},
    kv_indexings={"token_i64", "token_i32", "page_table"},
    draft_sources={"extend_rows", "cache_slots"}, writes_lse=True,
    # Operands widened from their storage exactly; scores, softmax and P.V in fp32 (P kept fp32).
    operand_unit=0.0, accumulate_unit=2.0**-23, p_unit=2.0**-24)


def gather(b, slots):
    """(c [n, 512], k_pe [n, 64]) float32 of the given host slots, through kv_layout."""
    L = b.kv_layout
    s = torch.as_tensor(slots, dtype=torch.int64, device=b.device)[:, None]
    c = b.kv_pool[L.latent_offset + s * L.latent_stride + torch.arange(512, device=b.device)]
    k_pe = b.kv_pool[L.rope_offset + s * L.rope_stride + torch.arange(64, device=b.device)]
    return c.float(), k_pe.float()


def verify(b, sm_scale=None):
    h = b.host  # numpy metadata; tensors below live on b.device
    scale = float(b.sm_scale if sm_scale is None else sm_scale)
    for i in range(h.batch_size):
        q0, d, _, p = md.extent(h, i)
        if d == 0:
            continue
        c, k_pe = gather(b, md.kv_slots(h, i, 0, p))
        if h.draft_source == "cache_slots":
            dc, dk = gather(b, md.kv_slots(h, i, p, d))
        else:
            ext = b.k_extend[q0:q0 + d].float()
            dc, dk = ext[:, :512], ext[:, 512:]
        c, k_pe = torch.cat([c, dc]), torch.cat([k_pe, dk])          # [P + D, 512], [P + D, 64]
        q_lat, q_pe = b.q_lat[q0:q0 + d].float(), b.q_pe[q0:q0 + d].float()  # [D, H, ..]
        scores = (q_lat @ c.T + q_pe @ k_pe.T) * scale               # [D, H, P + D]
        visible = torch.ones(d, p + d, dtype=torch.bool, device=b.device)
        visible[:, p:] = torch.as_tensor(md.draft_block(h, i), device=b.device)
        scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)                        # -inf: sees no key
        w = torch.exp(scores - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])
        b.o_lat[q0:q0 + d] = (w @ c).to(b.o_lat.dtype)
        b.lse[q0:q0 + d] = lse


def backend(name="torch-verify", device="cuda", **bugs):
    """The backend; bugs (sm_scale=...) replace a part, for planted-bug tests."""
    return mv.PythonBackend(lambda b: verify(b, **bugs), name=name, capabilities=CAPABILITIES,
                            device=device)


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261201
    report = mv.fuzz(backend(), cases=cases, seed=seed)
    print(report)
    sys.exit(report.exit_code)

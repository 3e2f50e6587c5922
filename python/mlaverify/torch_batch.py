"""The CUDA path of a Python backend: a Batch staged to torch tensors on a CUDA device, and the
outputs copied back.

Why staging and not device pointers: the suite's tables are host-memory (MLAV_MEMORY_HOST), so the
same library, built with or without CUDA, serves a torch or Triton backend; the only GPU code on
this path is the user's own. Each buffer is copied whole, by the extent its mlav_params implies,
and the output buffers are copied to the device *with* the guard pattern the suite wrote around
the real rows, then copied back whole, so a write past row T or into a gap a stride skips comes
back to the host buffer where the suite's guard checks look. The cost is one host-device copy of each buffer per case: the fuzz cases
are small (megabytes), so it stays far below the kernel's own launch and the suite's checking.

Tensors keep the Batch's field names, strides and offsets; bf16 buffers become torch.bfloat16
(the same bits), the draft_bits mask int32 (the same bits as uint32).
"""

import numpy as np


def _torch():
    import torch  # noqa: F401  (only the CUDA path needs torch)
    return torch


def _to_device(torch, base, device):
    if base is None:
        return None
    if base.dtype == np.uint16:
        return torch.from_numpy(base.view(np.int16).copy()).to(device).view(torch.bfloat16)
    if base.dtype == np.uint32:
        return torch.from_numpy(base.view(np.int32).copy()).to(device)
    return torch.from_numpy(base.copy()).to(device)


def _view(torch, dev_base, shape, strides, offset=0):
    if dev_base is None:
        return None
    if any(s == 0 for s in shape):
        return torch.empty(shape, dtype=dev_base.dtype, device=dev_base.device)
    return torch.as_strided(dev_base, shape, strides, offset)


class TorchBatch:
    """A Batch's buffers as torch tensors on `device` (same names, shapes and strides)."""

    def __init__(self, batch, device="cuda"):
        torch = _torch()
        self._batch = batch
        self.device = torch.device(device)
        b = batch
        for name in ("batch_size", "num_heads", "max_draft", "num_splits", "max_total_q",
                     "sm_scale", "q_dtype", "kv_dtype", "o_dtype", "q_latent_offset",
                     "q_rope_offset", "q_token_stride", "q_head_stride", "kv_layout",
                     "pool_slots", "kv_indexing", "kv_indices_len", "block_table_stride",
                     "page_size", "draft_source", "k_extend_stride", "mask_format",
                     "mask_indptr_convention", "mask_len", "mask_draft_stride",
                     "mask_word_bytes", "o_token_stride", "o_head_stride"):
            setattr(self, name, getattr(b, name))
        dev = self.device
        H = b.num_heads
        self._q_base = _to_device(torch, b._q_base, dev)
        self.q = _view(torch, self._q_base, tuple(b.q.shape), (b.q_token_stride, b.q_head_stride, 1))
        self.kv_pool = _to_device(torch, b.kv_pool, dev)
        for name in ("qo_indptr", "kv_indptr", "kv_indices", "kv_indices_i32", "mask",
                     "mask_indptr"):
            setattr(self, name, _to_device(torch, getattr(b, name), dev))
        self.block_table = None if b.block_table is None else \
            _to_device(torch, np.ascontiguousarray(b.block_table), dev)
        self.k_extend = None
        if b.k_extend is not None and b.k_extend.shape[0] > 0:
            ext = b.k_extend
            count = (ext.shape[0] - 1) * b.k_extend_stride + 576
            base = np.lib.stride_tricks.as_strided(ext, shape=(count,),
                                                   strides=(ext.dtype.itemsize,))
            self.k_extend = _view(torch, _to_device(torch, base, dev), tuple(ext.shape),
                                  (b.k_extend_stride, 1))
        # Outputs: the caller's buffers as they are (guard pattern included), copied back whole.
        self._o_base = _to_device(torch, b._o_base, dev)
        self.o_lat = _view(torch, self._o_base, (b.max_total_q, H, 512),
                           (b.o_token_stride, b.o_head_stride, 1))
        self._lse_base = _to_device(torch, b._lse_base, dev)
        self.lse = None if self._lse_base is None else self._lse_base.view(b.max_total_q, H)
        # Host copies of the small metadata, for launch grids (no device read needed).
        self.host = b

    @property
    def total_q(self):
        return self._batch.total_q

    @property
    def q_lat(self):
        return self.q[:, :, self.q_latent_offset:self.q_latent_offset + 512]

    @property
    def q_pe(self):
        return self.q[:, :, self.q_rope_offset:self.q_rope_offset + 64]

    def copy_back(self):
        """Waits for the device and copies o_lat and lse (whole buffers) into the host batch."""
        torch = _torch()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        b = self._batch
        if self._o_base is not None:
            o = self._o_base
            o = o.view(torch.int16) if o.dtype == torch.bfloat16 else o
            host = o.cpu().numpy()
            b._o_base[:] = host.view(b._o_base.dtype)
        if self._lse_base is not None:
            b._lse_base[:] = self._lse_base.cpu().numpy()

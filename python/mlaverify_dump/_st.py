"""Minimal safetensors file writer and reader for numpy arrays, BF16 included.

The format (https://github.com/huggingface/safetensors): 8 bytes little-endian u64 N, N bytes of JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then
the byte buffer. Offsets are relative to the buffer, tensors are contiguous, row-major,
little-endian, and cover the buffer exactly with no gaps. We write the header ourselves because
safetensors.numpy has no bfloat16 (numpy lacks the dtype); reading goes through
safetensors.deserialize, so every file is validated by the reference implementation.
"""

import json
import os
import struct

import numpy as np

from ._bf16 import bits_to_f32

# safetensors dtype name -> numpy storage dtype (BF16 is stored as its uint16 bit pattern)
ST_TO_NP = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "I16": np.int16,
    "U16": np.uint16,
    "I32": np.int32,
    "U32": np.uint32,
    "I64": np.int64,
    "U64": np.uint64,
    "F16": np.float16,
    "BF16": np.uint16,
    "F32": np.float32,
    "F64": np.float64,
}
NP_TO_ST = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "U8",
    np.dtype(np.int8): "I8",
    np.dtype(np.int16): "I16",
    np.dtype(np.uint16): "U16",
    np.dtype(np.int32): "I32",
    np.dtype(np.uint32): "U32",
    np.dtype(np.int64): "I64",
    np.dtype(np.uint64): "U64",
    np.dtype(np.float16): "F16",
    np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64",
}


def write_file(path, tensors, metadata):
    """tensors: {name: (st_dtype, numpy storage array)}; metadata: {str: str}."""
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"__metadata__ must map str to str; {k!r}: {type(v).__name__}")
    # Widest elements first so that every tensor starts aligned to its own element size.
    order = sorted(tensors, key=lambda n: (-tensors[n][1].dtype.itemsize, n))
    header = {}
    blobs = []
    offset = 0
    for name in order:
        st_dtype, arr = tensors[name]
        arr = np.ascontiguousarray(arr)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        data = arr.tobytes()
        header[name] = {"dtype": st_dtype, "shape": [int(s) for s in arr.shape],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = dict(metadata)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)  # the buffer starts 8-byte aligned
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)  # never a half-written dump under the final name
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_file(path):
    """-> (tensors {name: numpy array, BF16 as float32 values}, dtypes {name: st_dtype}, metadata)."""
    import safetensors

    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    metadata = json.loads(raw[8:8 + n]).get("__metadata__", {}) or {}
    tensors, dtypes = {}, {}
    for name, t in safetensors.deserialize(raw):
        st = t["dtype"]
        if st not in ST_TO_NP:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {st}")
        a = np.frombuffer(bytes(t["data"]), dtype=ST_TO_NP[st]).reshape(t["shape"])
        if st == "BF16":
            a = bits_to_f32(a)
        tensors[name] = a
        dtypes[name] = st
    return tensors, dtypes, metadata

"""The C ABI's structs (include/mlaverify/c_api.h) and the library's entry points
(include/mlaverify/c_suite.h) as ctypes declarations.

These mirror the headers field for field; check_layout() compares every offset and size with
what the library itself was compiled with (mlav_suite_offsetof / mlav_suite_sizeof), so a header
change that this file missed is one clear error at load time, not memory read at a wrong offset.
"""

import ctypes as C

ABI_VERSION = 1

OK, INVALID_INPUT, UNSUPPORTED, ERROR = 0, 1, 2, 3
STATUS_NAMES = {OK: "ok", INVALID_INPUT: "invalid input", UNSUPPORTED: "unsupported",
                ERROR: "error"}

MEMORY_HOST, MEMORY_CUDA = 0, 1

# The enums, by the names the Python side uses (values of include/mlaverify/types.h).
DTYPES = {"bf16": 0, "f32": 1}
LAYOUTS = {"latent_first": 0, "rope_first": 1, "split": 2}
INDPTR_CONVENTIONS = {"csr": 0, "offsets_only": 1}
DRAFT_SOURCES = {"extend_rows": 0, "cache_slots": 1}
MASK_FORMATS = {"full": 0, "qlen_only": 1, "qlen_only_bitpacking": 2, "flashinfer_packed": 3,
                "draft_bits": 4}
KV_INDEXINGS = {"token_i64": 0, "token_i32": 1, "page_table": 2}

CAP_WRITES_LSE = 1 << 0
CAP_DETERMINISTIC = 1 << 1
CAP_HONOURS_NUM_SPLITS = 1 << 2
CAP_PADDED_KV_ROWS = 1 << 3
CAP_STRIDED_Q = 1 << 4
CAP_STRIDED_O = 1 << 5
CAP_PADDED_EXTEND_ROWS = 1 << 6


def name_of(table, value):
    for k, v in table.items():
        if v == value:
            return k
    return f"unknown({value})"


class mlav_kv_layout(C.Structure):
    _fields_ = [("kind", C.c_int32), ("reserved", C.c_int32),
                ("latent_offset", C.c_int64), ("latent_stride", C.c_int64),
                ("rope_offset", C.c_int64), ("rope_stride", C.c_int64)]


class mlav_params(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32), ("abi_version", C.c_uint32),
        ("batch_size", C.c_int32), ("num_heads", C.c_int32), ("max_draft", C.c_int32),
        ("num_splits", C.c_int32), ("max_total_q", C.c_int64), ("sm_scale", C.c_float),
        ("reserved0", C.c_int32),
        ("q", C.c_void_p), ("q_dtype", C.c_int32), ("reserved1", C.c_int32),
        ("q_token_stride", C.c_int64), ("q_head_stride", C.c_int64),
        ("q_latent_offset", C.c_int64), ("q_rope_offset", C.c_int64),
        ("kv_pool", C.c_void_p), ("kv_dtype", C.c_int32), ("reserved2", C.c_int32),
        ("kv_layout", mlav_kv_layout), ("pool_slots", C.c_int64),
        ("qo_indptr", C.c_void_p), ("kv_indptr", C.c_void_p),
        ("kv_indexing", C.c_int32), ("reserved3", C.c_int32),
        ("kv_indices", C.c_void_p), ("kv_indices_i32", C.c_void_p), ("kv_indices_len", C.c_int64),
        ("block_table", C.c_void_p), ("block_table_stride", C.c_int32), ("page_size", C.c_int32),
        ("draft_source", C.c_int32), ("reserved4", C.c_int32),
        ("k_extend", C.c_void_p), ("k_extend_stride", C.c_int64),
        ("mask_format", C.c_int32), ("mask_indptr_convention", C.c_int32),
        ("mask", C.c_void_p), ("mask_len", C.c_int64), ("mask_indptr", C.c_void_p),
        ("mask_draft_stride", C.c_int32), ("mask_word_bytes", C.c_int32),
        ("o_lat", C.c_void_p), ("o_dtype", C.c_int32), ("reserved5", C.c_int32),
        ("o_token_stride", C.c_int64), ("o_head_stride", C.c_int64),
        ("lse", C.c_void_p),
    ]


class mlav_capabilities(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32), ("abi_version", C.c_uint32),
        ("mask_formats", C.c_uint32), ("mask_indptr_conventions", C.c_uint32),
        ("kv_dtypes", C.c_uint32), ("q_dtypes", C.c_uint32), ("o_dtypes", C.c_uint32),
        ("kv_layouts", C.c_uint32), ("draft_sources", C.c_uint32), ("kv_indexings", C.c_uint32),
        ("page_sizes", C.c_uint32), ("flags", C.c_uint32),
        ("max_heads", C.c_int32), ("max_draft", C.c_int32), ("max_prefix", C.c_int64),
        ("operand_unit", C.c_double), ("accumulate_unit", C.c_double), ("p_unit", C.c_double),
        ("exp_unit", C.c_double), ("max_partials", C.c_int32), ("tile_keys", C.c_int32),
    ]


CAPABILITIES_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(mlav_capabilities), C.c_void_p,
                              C.c_size_t)
CAN_IMPLEMENT_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(mlav_params), C.c_void_p,
                               C.c_size_t)
WORKSPACE_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(mlav_params), C.POINTER(C.c_uint64),
                           C.c_void_p, C.c_size_t)
RUN_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(mlav_params), C.c_void_p, C.c_uint64,
                     C.c_void_p, C.c_void_p, C.c_size_t)
DESTROY_FN = C.CFUNCTYPE(None, C.c_void_p)


class mlav_backend(C.Structure):
    _fields_ = [
        ("struct_size", C.c_uint32), ("abi_version", C.c_uint32),
        ("self", C.c_void_p), ("name", C.c_char_p),
        ("memory", C.c_int32), ("reserved", C.c_int32),
        ("capabilities", CAPABILITIES_FN), ("can_implement", CAN_IMPLEMENT_FN),
        ("workspace_bytes", WORKSPACE_FN), ("run", RUN_FN), ("destroy", DESTROY_FN),
    ]


STRUCTS = {"mlav_kv_layout": mlav_kv_layout, "mlav_params": mlav_params,
           "mlav_capabilities": mlav_capabilities, "mlav_backend": mlav_backend}


def declare(lib):
    """Argument and result types of the c_suite.h entry points."""
    P = C.POINTER
    lib.mlav_suite_abi_version.restype = C.c_uint32
    lib.mlav_suite_abi_version.argtypes = []
    lib.mlav_suite_version.restype = C.c_char_p
    lib.mlav_suite_version.argtypes = []
    lib.mlav_suite_sizeof.restype = C.c_int64
    lib.mlav_suite_sizeof.argtypes = [C.c_char_p]
    lib.mlav_suite_offsetof.restype = C.c_int64
    lib.mlav_suite_offsetof.argtypes = [C.c_char_p, C.c_char_p]
    lib.mlav_suite_info.restype = C.c_int
    lib.mlav_suite_info.argtypes = [P(C.c_void_p), C.c_char_p, C.c_size_t]
    lib.mlav_builtin_backend.restype = C.c_int
    lib.mlav_builtin_backend.argtypes = [C.c_char_p, P(mlav_backend), C.c_char_p, C.c_size_t]
    lib.mlav_run.restype = C.c_int
    lib.mlav_run.argtypes = [P(mlav_backend), P(mlav_params), C.c_char_p, C.c_size_t]
    for fn in ("mlav_fuzz", "mlav_replay"):
        f = getattr(lib, fn)
        f.restype = C.c_int
        f.argtypes = [P(mlav_backend), C.c_char_p, P(C.c_void_p), C.c_char_p, C.c_size_t]
    lib.mlav_diagnose.restype = C.c_int
    lib.mlav_diagnose.argtypes = [C.c_char_p, C.c_char_p, P(C.c_void_p), C.c_char_p, C.c_size_t]
    lib.mlav_free.restype = None
    lib.mlav_free.argtypes = [C.c_void_p]


def check_layout(lib, path):
    """Every struct's size and every field's offset as the library has them, or LibraryError."""
    for sname, cls in STRUCTS.items():
        theirs = lib.mlav_suite_sizeof(sname.encode())
        if theirs != C.sizeof(cls):
            raise ImportError(f"{path}: sizeof({sname}) is {theirs} in the library, "
                              f"{C.sizeof(cls)} in mlaverify/_abi.py: the package and the library "
                              f"were built from different headers")
        for fname, _ in cls._fields_:
            off = lib.mlav_suite_offsetof(sname.encode(), fname.encode())
            mine = getattr(cls, fname).offset
            if off != mine:
                raise ImportError(f"{path}: offsetof({sname}, {fname}) is {off} in the library, "
                                  f"{mine} in mlaverify/_abi.py: the package and the library were "
                                  f"built from different headers")

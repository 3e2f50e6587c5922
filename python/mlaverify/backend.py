"""Backends as the package holds them: the built-in ones of the library (model, cpu, cuda, the
mutants) and a Python callable made a backend (PythonBackend), both as mlav_backend tables
(c_api.h) that the suite runs through the C ABI.

A Python backend is a callable fn(batch) that writes batch.o_lat and (if it declares writes_lse)
batch.lse for every real row. On the CPU (device="cpu") the batch is a Batch of numpy views of the
suite's own buffers; with device="cuda" it is a TorchBatch of tensors staged on the GPU and copied
back after the call (torch_batch.py says why). It declares what it takes with Capabilities: the
suite draws only cases inside them, so declare only what the callable really handles.
"""

import ctypes
import sys
import traceback

from . import _abi, _lib
from .batch import Batch
from .errors import InvalidInput, Unsupported, raise_status

_SETS = {
    "mask_formats": _abi.MASK_FORMATS, "mask_indptr_conventions": _abi.INDPTR_CONVENTIONS,
    "kv_dtypes": _abi.DTYPES, "q_dtypes": _abi.DTYPES, "o_dtypes": _abi.DTYPES,
    "kv_layouts": _abi.LAYOUTS, "draft_sources": _abi.DRAFT_SOURCES,
    "kv_indexings": _abi.KV_INDEXINGS,
}
_FLAGS = {
    "writes_lse": _abi.CAP_WRITES_LSE, "deterministic": _abi.CAP_DETERMINISTIC,
    "honours_num_splits": _abi.CAP_HONOURS_NUM_SPLITS, "padded_kv_rows": _abi.CAP_PADDED_KV_ROWS,
    "strided_q": _abi.CAP_STRIDED_Q, "strided_o": _abi.CAP_STRIDED_O,
    "padded_extend_rows": _abi.CAP_PADDED_EXTEND_ROWS,
}
_NUMBERS = ("max_heads", "max_draft", "max_prefix", "operand_unit", "accumulate_unit", "p_unit",
            "exp_unit", "max_partials", "tile_keys")


class Capabilities:
    """What a backend takes and how it computes (mlav_capabilities). Every argument left None keeps
    the library's default (everything the model accepts; c_api.h mlav_capabilities_default).

    Sets are iterables of names: mask_formats {"full", "qlen_only", "qlen_only_bitpacking",
    "flashinfer_packed", "draft_bits"}, mask_indptr_conventions {"csr", "offsets_only"},
    kv_dtypes / q_dtypes / o_dtypes {"bf16", "f32"}, kv_layouts {"latent_first", "rope_first",
    "split"}, draft_sources {"extend_rows", "cache_slots"}, kv_indexings {"token_i64",
    "token_i32", "page_table"}; page_sizes an iterable of powers of two. Flags are booleans:
    writes_lse, deterministic, honours_num_splits, padded_kv_rows, strided_q, strided_o,
    padded_extend_rows. Numbers: max_heads, max_draft, max_prefix, and the numerics
    (operand_unit, accumulate_unit, p_unit, exp_unit, max_partials, tile_keys; backend.h says
    what each is; the tolerance the suite holds the backend to is derived from them)."""

    def __init__(self, **kwargs):
        known = set(_SETS) | set(_FLAGS) | set(_NUMBERS) | {"page_sizes"}
        for k in kwargs:
            if k not in known:
                raise InvalidInput(f"capabilities.{k}: unknown (known: {', '.join(sorted(known))})")
        self.values = dict(kwargs)
        self.fill(_abi.mlav_capabilities())  # check the names now, not in the first callback

    def fill(self, caps):
        for key, value in self.values.items():
            if value is None:
                continue
            if key in _SETS:
                table = _SETS[key]
                bits = 0
                names = [value] if isinstance(value, str) else list(value)
                for name in names:
                    if name not in table:
                        raise InvalidInput(f"capabilities.{key}: unknown value {name!r} "
                                           f"(known: {', '.join(table)})")
                    bits |= 1 << table[name]
                setattr(caps, key, bits)
            elif key == "page_sizes":
                bits = 0
                for size in value:
                    if size <= 0 or size & (size - 1):
                        raise InvalidInput(f"capabilities.page_sizes: {size} is not a power of two")
                    bits |= 1 << (int(size).bit_length() - 1)
                caps.page_sizes = bits
            elif key in _FLAGS:
                caps.flags = (caps.flags | _FLAGS[key]) if value else (caps.flags & ~_FLAGS[key])
            else:
                setattr(caps, key, value)
        return caps

    def __repr__(self):
        return "Capabilities(" + ", ".join(f"{k}={v!r}" for k, v in self.values.items()) + ")"


def _write_err(buf, size, text):
    if not buf or not size:
        return
    data = text.encode("utf-8", "replace")[: size - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))


def _describe(exc):
    """One line for an exception from user code: type, message, and where it was raised."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class Backend:
    """A backend as an mlav_backend table the library runs. Subclasses fill self._table."""

    name = "?"

    def table(self):
        return self._table

    def run(self, launch):
        """One launch on host arrays (a Launch, see launch.py): validates, runs, fills its
        o_lat and lse. InvalidInput / Unsupported as the backend says."""
        lib = _lib.library()
        err = _lib.err_buffer()
        status = lib.mlav_run(ctypes.byref(self._table), ctypes.byref(launch.params), err,
                              _lib.ERR_SIZE)
        if status != _abi.OK:
            raise_status(status, err.value.decode("utf-8", "replace"))
        return launch

    def __repr__(self):
        return f"<mlaverify backend {self.name}>"


class BuiltinBackend(Backend):
    """One of the library's backends by name: model, cpu, cpu-folded, cuda, mutant:<name>."""

    def __init__(self, name):
        lib = _lib.library()
        self._table = _abi.mlav_backend()
        self._table.struct_size = ctypes.sizeof(_abi.mlav_backend)
        self._table.abi_version = _abi.ABI_VERSION
        err = _lib.err_buffer()
        status = lib.mlav_builtin_backend(name.encode(), ctypes.byref(self._table), err,
                                          _lib.ERR_SIZE)
        if status != _abi.OK:
            raise_status(status, err.value.decode("utf-8", "replace"))
        self.name = name
        self._destroy = self._table.destroy

    def __del__(self):
        t = getattr(self, "_table", None)
        if t is not None and t.self and self._destroy:
            self._destroy(t.self)
            t.self = None


class PythonBackend(Backend):
    """A Python callable as a backend.

    fn(batch): writes batch.o_lat (and batch.lse when capabilities say writes_lse); raise
        mlaverify.Unsupported("why") to refuse a case (a skip), mlaverify.InvalidInput for
        metadata that breaks docs/spec.md section 3; any other exception fails the case.
    name: the label in reports and scenario file names.
    capabilities: a Capabilities (default: everything the model accepts, which few callables do).
    device: "cpu" (numpy Batch), "cuda" / "cuda:N" (TorchBatch; needs torch and a GPU), or
        "torch-cpu" (a TorchBatch of CPU tensors: a torch backend run without a GPU).
    can_implement: optional callable(batch) -> None, or a reason string to refuse the case.
    """

    def __init__(self, fn, *, name="python", capabilities=None, device="cpu",
                 can_implement=None):
        if not callable(fn):
            raise TypeError(f"PythonBackend: fn must be callable, got {type(fn).__name__}")
        self.fn, self.name = fn, name
        self.capabilities_ = capabilities if capabilities is not None else Capabilities()
        if not isinstance(self.capabilities_, Capabilities):
            raise TypeError("PythonBackend: capabilities must be a mlaverify.Capabilities")
        self.device = device
        if device not in ("cpu", "torch-cpu") and not str(device).startswith("cuda"):
            raise InvalidInput(f"device: {device!r} is none of 'cpu', 'cuda[:N]', 'torch-cpu'")
        self.can_implement_fn = can_implement
        self.calls = 0
        self._name_bytes = name.encode()
        # The callbacks must outlive every call the library makes: kept on the object.
        self._cbs = (_abi.CAPABILITIES_FN(self._cb_capabilities),
                     _abi.CAN_IMPLEMENT_FN(self._cb_can_implement),
                     _abi.WORKSPACE_FN(self._cb_workspace),
                     _abi.RUN_FN(self._cb_run))
        t = _abi.mlav_backend()
        t.struct_size = ctypes.sizeof(_abi.mlav_backend)
        t.abi_version = _abi.ABI_VERSION
        t.self = None
        t.name = self._name_bytes
        t.memory = _abi.MEMORY_HOST  # the CUDA path stages inside the callback (torch_batch.py)
        t.capabilities, t.can_implement, t.workspace_bytes, t.run = self._cbs
        t.destroy = _abi.DESTROY_FN()  # NULL: the Python object owns everything
        self._table = t

    # ---- callbacks: never let an exception cross into C (ctypes would return 0, MLAV_OK) ----
    def _guard(self, err, size, body):
        try:
            body()
            return _abi.OK
        except Unsupported as e:
            _write_err(err, size, str(e) or "unsupported")
            return _abi.UNSUPPORTED
        except InvalidInput as e:
            _write_err(err, size, str(e))
            return _abi.INVALID_INPUT
        except BaseException as e:  # noqa: B902 - a KeyboardInterrupt must not read as a pass
            _write_err(err, size, f"{self.name}: {_describe(e)}")
            if isinstance(e, KeyboardInterrupt):
                print("mlaverify: interrupted inside a backend call", file=sys.stderr)
            return _abi.ERROR

    def _cb_capabilities(self, _self, caps, err, size):
        return self._guard(err, size, lambda: self.capabilities_.fill(caps.contents))

    def _cb_can_implement(self, _self, params, why, size):
        if self.can_implement_fn is None:
            return _abi.OK

        def body():
            reason = self.can_implement_fn(Batch(params.contents))
            if reason:
                raise Unsupported(str(reason))
        return self._guard(why, size, body)

    def _cb_workspace(self, _self, params, out, err, size):
        out[0] = 0
        return _abi.OK

    def _cb_run(self, _self, params, workspace, workspace_bytes, stream, err, size):
        def body():
            self.calls += 1
            batch = Batch(params.contents)
            if self.device == "cpu":
                self.fn(batch)
                return
            from .torch_batch import TorchBatch
            tb = TorchBatch(batch, "cpu" if self.device == "torch-cpu" else self.device)
            self.fn(tb)
            tb.copy_back()
        return self._guard(err, size, body)


def builtin(name):
    return BuiltinBackend(name)


def model():
    """The reference model (double precision from the stored values): the executable spec."""
    return BuiltinBackend("model")


def cpu():
    """The CPU backend: the production kernel's algorithm on the CPU."""
    return BuiltinBackend("cpu")


def cuda():
    """The CUDA backend (the production kernel). Without a device its can_implement says why and
    the suite reports every case skipped; cuda_status() says so up front."""
    return BuiltinBackend("cuda")


def mutant(name):
    """A catalog mutant over the CPU backend (a planted bug the suite must catch)."""
    return BuiltinBackend(name if name.startswith("mutant:") else "mutant:" + name)


def as_backend(backend):
    if isinstance(backend, Backend):
        return backend
    if isinstance(backend, str):
        return BuiltinBackend(backend)
    if callable(backend):
        raise TypeError("a plain callable is not a backend: wrap it as "
                        "mlaverify.PythonBackend(fn, capabilities=mlaverify.Capabilities(...)) "
                        "so that it says what it takes")
    raise TypeError(f"not a backend: {backend!r}")

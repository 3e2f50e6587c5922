"""mlaverify from Python: the property suite, scenario replay and dump diagnose of mlaverify (MLA
tree-verify attention), on the built-in backends or on a verify kernel written in Python.

    import mlaverify as mv
    report = mv.fuzz(mv.cpu(), cases=50, seed=7)          # a built-in backend
    be = mv.PythonBackend(my_verify, name="mine",
                          capabilities=mv.Capabilities(mask_formats={"full"}, ...))
    report = mv.fuzz(be, cases=50)                        # failures: report.failures
    mv.replay(report.failures[0].file, be)                # the shrunk scenario again
    mv.diagnose("server_dump.safetensors")                # which misreading a server made
    mv.dump.write_verify_dump(...)                        # the dump writer (mlaverify_dump)

Everything runs in libmlaverify_c.so through ctypes (python/README.md: why, and how the library
is found); the library is loaded on first use, so the dump writer needs only numpy.
"""

__version__ = "0.2.0"

from . import bf16, dump, metadata  # noqa: E402,F401
from .backend import (Backend, BuiltinBackend, Capabilities, PythonBackend, builtin,  # noqa: E402
                      cpu, cuda, model, mutant)
from .batch import Batch, KvLayout  # noqa: E402
from .errors import InvalidInput, MlaverifyError, Unsupported  # noqa: E402
from .launch import Launch  # noqa: E402
from .suite import (Diagnosis, Failure, FuzzReport, ReplayReport, diagnose, fuzz,  # noqa: E402
                    replay)
from ._lib import LibraryNotFound, library_path  # noqa: E402


def info():
    """What the library holds: {"version", "abi_version", "backends", "mutants", "properties",
    "cuda": {"built", "available", "reason"}}."""
    from ._lib import info as _info
    return _info()


def cuda_status():
    """(available, reason): whether the library's CUDA backend can run here, and why not."""
    c = info()["cuda"]
    return bool(c["available"]), c["reason"]


__all__ = ["Backend", "BuiltinBackend", "Capabilities", "PythonBackend", "builtin", "cpu", "cuda",
           "model", "mutant", "Batch", "KvLayout", "InvalidInput", "MlaverifyError",
           "Unsupported", "Launch", "Diagnosis", "Failure", "FuzzReport", "ReplayReport",
           "diagnose", "fuzz", "replay", "LibraryNotFound", "library_path", "info",
           "cuda_status", "bf16", "dump", "metadata", "__version__"]

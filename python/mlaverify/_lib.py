"""Finding and loading libmlaverify_c.so, the one shared library the package reaches mlaverify
through (ctypes; README.md says why not a CPython extension).

Where it looks, first hit wins:
  1. $MLAVERIFY_LIBRARY, a path to the .so (an error if set and not loadable: no silent fallback);
  2. mlaverify/_native/libmlaverify_c.so, the copy bundled when the package was installed
     (python/_build/mlav_build.py copies it from $MLAVERIFY_LIBRARY or the build tree at install time);
  3. the build trees of a source checkout this package sits in: build/capi/, .device/.
The library is loaded on first use, so `import mlaverify` (and the dump writer) works without it.
"""

import ctypes
import json
import os

from . import _abi

LIBRARY_NAME = "libmlaverify_c.so"
_HERE = os.path.dirname(os.path.abspath(__file__))


class LibraryNotFound(ImportError):
    """libmlaverify_c.so could not be found or loaded; the message lists every place tried."""


def candidates():
    """(path, where) pairs, in the order they are tried."""
    out = []
    env = os.environ.get("MLAVERIFY_LIBRARY")
    if env:
        return [(env, "$MLAVERIFY_LIBRARY")]
    out.append((os.path.join(_HERE, "_native", LIBRARY_NAME), "bundled at install"))
    root = os.path.dirname(os.path.dirname(_HERE))  # python/mlaverify -> the checkout
    for sub in ("build/capi", ".device"):
        out.append((os.path.join(root, sub, LIBRARY_NAME), "build tree"))
    return out


_lib = None
_path = None


def library():
    """The loaded library (ctypes.CDLL), its layout checked against _abi.py."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    env_set = bool(os.environ.get("MLAVERIFY_LIBRARY"))
    for path, where in candidates():
        if not os.path.isfile(path):
            tried.append(f"{path} ({where}): no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({where}): {e}")
            if env_set:
                break
            continue
        _abi.declare(lib)
        if lib.mlav_suite_abi_version() != _abi.ABI_VERSION:
            raise LibraryNotFound(f"{path}: C ABI version {lib.mlav_suite_abi_version()}, "
                                  f"this package speaks {_abi.ABI_VERSION}")
        _abi.check_layout(lib, path)
        _lib, _path = lib, path
        return lib
    raise LibraryNotFound("libmlaverify_c.so not found; tried:\n  " + "\n  ".join(tried) +
                          "\nbuild it (scripts/build.sh mlaverify_c) and set MLAVERIFY_LIBRARY "
                          "or reinstall the package (pip install ./python bundles it)")


def library_path():
    library()
    return _path


ERR_SIZE = 4096


def err_buffer():
    return ctypes.create_string_buffer(ERR_SIZE)


def take_string(ptr):
    """A library-allocated string, decoded and freed."""
    if not ptr.value:
        return None
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        library().mlav_free(ptr)


def call_json(fn, *args):
    """Calls a c_suite.h entry point that returns a JSON document; raises on a status."""
    from .errors import raise_status
    out = ctypes.c_void_p()
    err = err_buffer()
    status = fn(*args, ctypes.byref(out), err, ERR_SIZE)
    text = take_string(out)
    if status != _abi.OK:
        raise_status(status, err.value.decode("utf-8", "replace"))
    return json.loads(text)


def info():
    """What the library holds: backends, mutants, properties, CUDA build and device."""
    return call_json(library().mlav_suite_info)

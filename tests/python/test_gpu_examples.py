"""The torch and Triton verify examples (python/examples) fuzzed on a GPU through the Python route
(TorchBatch: the suite's buffers staged to CUDA tensors), green, and each with a planted bug that
the suite catches, shrinks and writes as a scenario that replays red on the bug and green on the
fix; and the library's own CUDA backend fuzzed from Python.

Without torch, without a CUDA device, or without triton, the tests skip and say which. They run
under pytest, or as `python tests/python/test_gpu_examples.py` where pytest is not installed (the
GPU machine's system Python): scripts/device_python.sh does either. MLAV_GPU_CASES sets the
campaigns' size (default 30), MLAV_SEED the seed.
"""
import json
import os
import sys
import tempfile

try:
    import pytest
except ImportError:  # the plain runner at the bottom
    pytest = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("MLAV_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))

import mlaverify as mv  # noqa: E402

SEED = int(os.environ.get("MLAV_SEED", "20261201")) % (2**31)
CASES = int(os.environ.get("MLAV_GPU_CASES", "30"))


class Skipped(Exception):
    pass


def skip(reason):
    if pytest is not None:
        pytest.skip(reason)
    raise Skipped(reason)


def need_torch():
    try:
        import torch
    except ImportError:
        skip("torch is not installed: the torch and Triton examples run on the GPU machine "
             "(scripts/device_python.sh)")
    if not torch.cuda.is_available():
        skip("no CUDA device (torch.cuda.is_available() is False)")
    return torch


def need_triton():
    need_torch()
    try:
        import triton  # noqa: F401
    except ImportError:
        skip("triton is not installed")


def case_size(path):
    with open(path) as f:
        reqs = json.load(f)["case"]["requests"]
    return len(reqs), sum(len(r["parents"]) for r in reqs), sum(r["prefix_len"] for r in reqs)


def green(backend):
    out = tempfile.mkdtemp(prefix="mlav-gpu-")
    r = mv.fuzz(backend, cases=CASES, seed=SEED, out_dir=out)
    print(r)
    assert r.ok, r
    assert r.cases_run == CASES
    for name, s in r.stats.items():
        assert s["passed"] > 0, (name, s)
    return r


def caught(buggy, fixed, max_size):
    out = tempfile.mkdtemp(prefix="mlav-gpu-bug-")
    r = mv.fuzz(buggy, cases=CASES, seed=SEED, out_dir=out, properties=["vs_model"])
    print(r)
    assert not r.ok and r.failures, f"planted bug not caught:\n{r}"
    f = r.failures[0]
    size = case_size(f.file)
    print(f"{buggy.name}: {f.property} shrunk in {f.shrink_steps} steps to {f.shrunk} -> "
          f"(requests, draft nodes, prefix) = {size}; scenario {f.file}")
    assert all(got <= most for got, most in zip(size, max_size)), (size, f)
    again = mv.replay(f.file, buggy)
    assert again.exit_code == 1 and again.entries[0]["status"] == "fail", again
    ok = mv.replay(f.file, fixed)
    assert ok.ok, ok


def test_torch_example_green():
    need_torch()
    import torch_verify
    green(torch_verify.backend())


def test_torch_planted_sm_scale_caught():
    need_torch()
    import torch_verify
    caught(torch_verify.backend(name="torch-sm576", sm_scale=576 ** -0.5),
           torch_verify.backend(), (1, 2, 2))


def test_triton_example_green():
    need_triton()
    import triton_verify
    green(triton_verify.backend())


def test_triton_planted_no_diagonal_caught():
    need_triton()
    import triton_verify
    caught(triton_verify.backend(name="triton-nodiag", no_diagonal=True),
           triton_verify.backend(), (1, 2, 2))


def test_library_cuda_backend_green():
    ok, reason = mv.cuda_status()
    if not ok:
        skip(f"the library's CUDA backend cannot run here: {reason}")
    green(mv.cuda())


if __name__ == "__main__":
    pytest = None  # noqa: F811 - skip() raises the runner's own Skipped
    print(f"mlaverify {mv.__version__} from {os.path.dirname(mv.__file__)}, library "
          f"{mv.library_path()}")
    results = {}
    for name, fn in list(globals().items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        try:
            fn()
            results[name] = "passed"
        except Skipped as e:
            results[name] = f"skipped: {e}"
        except BaseException as e:  # noqa: B902 - report and go on to the next test
            import traceback
            traceback.print_exc()
            results[name] = f"FAILED: {type(e).__name__}: {str(e)[:300]}"
        print(f"{name}: {results[name]}", flush=True)
    passed = sum(v == "passed" for v in results.values())
    failed = sum(v.startswith("FAILED") for v in results.values())
    skipped = len(results) - passed - failed
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)

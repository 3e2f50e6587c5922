"""The mlaverify Python package over libmlaverify_c.so: the built-in backends, a numpy verify
implementation fuzzed through the Python route (green), the same with planted bugs (caught, shrunk,
written as scenario files that replay red on the bug and green on the fix), the model run on arrays
the caller holds, dump replay and diagnose, bad input as one clear error, and a real pip install
whose bundled library works outside the source tree.

MLAVERIFY_LIBRARY is the library (ctest sets it to the build's); without it the tests look where
the package looks (mlaverify/_lib.py) and fail, not skip, when it is nowhere: a package test that
did not run is no pass. MLAV_SEED and MLAV_PY_CASES set the campaigns' seed and size.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mlaverify as mv
from mlaverify import metadata as md

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import numpy_verify  # noqa: E402

SEED = int(os.environ.get("MLAV_SEED", "20261201")) % (2**31)
CASES = int(os.environ.get("MLAV_PY_CASES", "12"))
SHIPPED = os.path.join(ROOT, "scenarios", "dumps", "k2_eagle16.safetensors")


def scenario_case(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["case"]


def case_size(case):
    """(requests, total draft nodes, total prefix) of a scenario file's case."""
    reqs = case["requests"]
    return len(reqs), sum(len(r["parents"]) for r in reqs), sum(r["prefix_len"] for r in reqs)


# ---- the library --------------------------------------------------------------------------------

def test_library_loads_and_layout_matches():
    path = mv.library_path()
    assert os.path.basename(path) == "libmlaverify_c.so"
    info = mv.info()
    assert info["abi_version"] == 1
    assert {"model", "cpu"} <= set(info["backends"])
    assert "vs_model" in info["properties"] and info["mutants"]
    ok, reason = mv.cuda_status()
    # No GPU here: the CUDA backend, when built in, says why it cannot run instead of failing.
    assert ok or reason


def test_library_loads_only_libc_and_libm():
    """Linked statically against libstdc++, libgcc and the project (it must load on an image
    without -dev packages): its dynamic dependencies are the C library's."""
    out = subprocess.run(["ldd", mv.library_path()], capture_output=True, text=True).stdout
    needed = [line.split()[0] for line in out.splitlines() if "=>" in line]
    allowed = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux")
    assert needed and all(n.startswith(allowed) for n in needed), out


def test_missing_library_is_one_clear_error(tmp_path):
    code = "import mlaverify as mv\ntry:\n    mv.info()\nexcept mv.LibraryNotFound as e:\n" \
           "    print('NOTFOUND', e)\n"
    env = dict(os.environ, MLAVERIFY_LIBRARY=str(tmp_path / "nope.so"),
               PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "NOTFOUND" in out.stdout and "nope.so" in out.stdout, out.stdout + out.stderr


# ---- built-in backends --------------------------------------------------------------------------

def test_cpu_backend_fuzz_green():
    r = mv.fuzz(mv.cpu(), cases=4, seed=SEED)
    assert r.ok, r
    assert r.cases_run == 4 and all(s["passed"] > 0 for s in r.stats.values())


def test_report_carries_coverage_and_options_are_strict():
    r = mv.fuzz(mv.cpu(), cases=6, seed=3, properties=["metadata"])
    formats = [row for row in r.coverage if row["field"] == "mask_format"]
    assert formats and sum(row["cases"] for row in formats) == r.cases_run == 6
    assert set(r.coverage_missing) == {f"{row['field']}={row['value']}" for row in r.coverage
                                       if row["accepted"] and row["cases"] == 0}
    # Out of the CLI's --cases range: one InvalidInput naming the option, no campaign.
    with pytest.raises(mv.InvalidInput, match=r"^options\.cases: 0 outside \[1, 1000000\]"):
        mv.fuzz(mv.cpu(), cases=0)


def test_builtin_mutant_caught_and_replayed(tmp_path):
    r = mv.fuzz(mv.mutant("mask_row_stride_d"), cases=20, seed=SEED, out_dir=tmp_path)
    assert not r.ok and r.failures, r
    f = r.failures[0]
    assert f.file and os.path.isfile(f.file) and f.file.startswith(str(tmp_path))
    assert f.scenario["backend"].startswith("mutant:mask_row_stride_d")
    fixed = mv.replay(f.file, mv.cpu())
    assert fixed.ok, fixed
    # Replayed on cpu, the scenario is also re-run on the mutant it names, where it must fail.
    assert fixed.entries[0]["recorded"] == "reproduced"
    broken = mv.replay(f.file, mv.mutant("mask_row_stride_d"), check_recorded=False)
    assert broken.exit_code == 1 and broken.entries[0]["status"] == "fail"


# ---- the model and backends on caller-held arrays -----------------------------------------------

def random_launch(rng, bs=3, heads=4, bf16=True, o_dtype="bf16"):
    """A small FULL_MASK batch with random trees, k_extend draft rows, scattered prefix slots."""
    D = rng.integers(1, 6, bs)
    P = rng.integers(0, 40, bs)
    slots = rng.permutation(np.arange(1, 1 + P.sum() + 8))[: P.sum()]
    pool = rng.standard_normal((P.sum() + 9, 576)).astype(np.float32) / 4
    q = rng.standard_normal((D.sum(), heads, 576)).astype(np.float32) / 4
    k_extend = rng.standard_normal((D.sum(), 576)).astype(np.float32) / 4
    masks, mask_indptr = [], [0]
    for d, p in zip(D, P):
        parents = [-1] + [int(rng.integers(0, t)) for t in range(1, d)]
        vis = np.zeros((d, d), np.uint8)
        for t in range(d):
            a = t
            while a >= 0:
                vis[t, a] = 1
                a = parents[a]
        rows = np.concatenate([np.ones((d, p), np.uint8), vis], axis=1)
        masks.append(rows.reshape(-1))
        mask_indptr.append(mask_indptr[-1] + rows.size)
    conv = (lambda a: mv.bf16.from_float32(a)) if bf16 else (lambda a: a)
    return mv.Launch(q=conv(q), kv_pool=conv(pool), k_extend=conv(k_extend),
                     qo_indptr=np.concatenate([[0], np.cumsum(D)]),
                     kv_indptr=np.concatenate([[0], np.cumsum(P)]), kv_indices=slots,
                     mask=np.concatenate(masks), mask_indptr=np.array(mask_indptr),
                     sm_scale=0.1308608, o_dtype=o_dtype)


@pytest.mark.parametrize("bf16", [True, False])
def test_model_cpu_and_numpy_agree_on_caller_arrays(bf16):
    ref = random_launch(np.random.default_rng(SEED), bf16=bf16).run(mv.model())
    assert np.isfinite(ref.o_lat).all() and np.isfinite(ref.lse).all()
    for backend in (mv.cpu(), numpy_verify.backend()):
        out = random_launch(np.random.default_rng(SEED), bf16=bf16).run(backend)
        # Both round the same double-precision answer to bf16 (cpu: its own fp32 algorithm), so
        # they differ by at most a few bf16 ulps (2^-8 relative) of the largest element.
        scale = np.abs(ref.o_lat).max()
        assert np.abs(out.o_lat - ref.o_lat).max() <= 4 * 2**-8 * scale, backend
        assert np.abs(out.lse - ref.lse).max() <= 1e-3, backend


def test_launch_bad_input_names_the_argument():
    good = dict(q=np.zeros((2, 1, 576), np.float32), kv_pool=np.zeros((4, 576), np.float32),
                qo_indptr=[0, 2], kv_indptr=[0, 1], kv_indices=[1],
                mask=np.ones(2 * 3, np.uint8), mask_indptr=[0, 6], sm_scale=0.1,
                k_extend=np.zeros((2, 576), np.float32))
    with pytest.raises(mv.InvalidInput, match=r"^q: expected"):
        mv.Launch(**dict(good, q=np.zeros((2, 1, 512), np.float32)))
    with pytest.raises(mv.InvalidInput, match=r"^kv_indptr: expected length 2"):
        mv.Launch(**dict(good, kv_indptr=[0, 1, 2]))
    with pytest.raises(mv.InvalidInput, match=r"^mask_format: unknown"):
        mv.Launch(**dict(good, mask_format="fulll"))
    # Metadata that breaks docs/spec.md section 3 is refused by the library, naming the field.
    bad = mv.Launch(**dict(good, kv_indices=[7]))
    with pytest.raises(mv.InvalidInput, match=r"kv_indices"):
        bad.run(mv.model())


def test_capabilities_bad_name():
    with pytest.raises(mv.InvalidInput, match=r"capabilities\.mask_formats: unknown value 'fulll'"):
        mv.Capabilities(mask_formats={"fulll"})
    with pytest.raises(mv.InvalidInput, match=r"capabilities\.mask_format: unknown"):
        mv.Capabilities(mask_format={"full"})


# ---- a numpy verify implementation through the Python route -------------------------------------

def test_numpy_example_fuzz_green(tmp_path):
    r = mv.fuzz(numpy_verify.backend(), cases=CASES, seed=SEED, out_dir=tmp_path)
    print(r)
    assert r.ok, r
    assert r.cases_run == CASES
    # It declares every format, so every property checked something on every case.
    for name, s in r.stats.items():
        assert s["passed"] == CASES and s["skipped"] == 0, (name, s)


def stride_d_block(b, i):
    """Planted bug (docs/spec.md §7 class 5): FULL_MASK rows read D apart instead of P + D."""
    if b.mask_format != "full":
        return md.draft_block(b, i)
    _, d, _, _ = md.extent(b, i)
    start = int(b.mask_indptr[i])
    return b.mask[start:start + d * d].reshape(d, d) != 0


@pytest.mark.parametrize("bug,kw,max_size", [
    ("mask_stride_d", {"draft_block": stride_d_block}, (1, 3, 2)),  # seen: D=[2] P=[1]
    ("sm_scale_576", {"sm_scale": 576 ** -0.5}, (1, 1, 1)),  # seen: D=[1] P=[0], by lse
])
def test_numpy_planted_bug_caught_shrunk_and_replayed(tmp_path, bug, kw, max_size):
    buggy = numpy_verify.backend(name="numpy-" + bug, **kw)
    # vs_model alone: the property that names both bugs (the green run above runs them all).
    r = mv.fuzz(buggy, cases=max(CASES, 20), seed=SEED, out_dir=tmp_path,
                properties=["vs_model"])
    print(r)
    assert not r.ok and r.failures, f"planted bug {bug} not caught:\n{r}"
    f = r.failures[0]
    assert os.path.isfile(f.file), f
    size = case_size(scenario_case(f.file))
    print(f"{bug}: {f.property} shrunk in {f.shrink_steps} steps to {f.shrunk} -> {size}")
    assert all(got <= most for got, most in zip(size, max_size)), (size, f)
    again = mv.replay(f.file, buggy)
    assert again.exit_code == 1 and again.entries[0]["status"] == "fail", again
    fixed = mv.replay(f.file, numpy_verify.backend())
    assert fixed.ok, fixed


def test_python_exception_fails_the_case_with_its_place(tmp_path):
    def broken(b):
        raise ZeroDivisionError("planted")
    be = mv.PythonBackend(broken, name="raises", capabilities=numpy_verify.CAPABILITIES)
    r = mv.fuzz(be, cases=2, seed=SEED, properties=["vs_model"], out_dir=tmp_path)
    assert not r.ok and r.failures
    assert "ZeroDivisionError: planted" in r.failures[0].detail
    assert "test_package.py" in r.failures[0].detail  # where it was raised


def test_writes_outside_the_real_rows_are_caught(tmp_path):
    """The outputs are views of the suite's guarded buffers: zeroing the whole buffer (the gaps a
    head or token stride skips, the rows past T) is a failing case, through the Python route."""
    def scribbles(b):
        b._o_base[:] = 0
        b._lse_base[:] = 0
        numpy_verify.verify(b)
    be = mv.PythonBackend(scribbles, name="scribbles", capabilities=numpy_verify.CAPABILITIES)
    r = mv.fuzz(be, cases=max(CASES, 10), seed=SEED, properties=["vs_model"], out_dir=tmp_path)
    assert not r.ok and r.failures, r
    assert "no backend may write" in r.failures[0].detail, r.failures[0]


def test_unsupported_everywhere_is_not_green():
    def refuses(b):
        raise mv.Unsupported("this backend refuses everything")
    be = mv.PythonBackend(refuses, name="refuses", capabilities=numpy_verify.CAPABILITIES)
    r = mv.fuzz(be, cases=2, seed=SEED, properties=["vs_model"])
    assert r.exit_code == 1 and not r.failures
    assert r.stats["vs_model"]["skipped"] == 2
    assert "refuses everything" in r.not_verified[0]


def test_unknown_property_is_bad_input():
    with pytest.raises(mv.InvalidInput, match=r"property.*nope"):
        mv.fuzz(mv.cpu(), cases=1, properties=["nope"])


def test_not_a_backend():
    with pytest.raises(TypeError, match="PythonBackend"):
        mv.fuzz(lambda b: None, cases=1)
    with pytest.raises(mv.InvalidInput, match="unknown backend"):
        mv.fuzz("no-such-backend", cases=1)


# ---- replay and diagnose of server dumps --------------------------------------------------------

def test_replay_missing_scenario_is_bad_input(tmp_path):
    r = mv.replay(tmp_path / "nope.json", mv.cpu())
    assert r.exit_code == 2
    assert r.entries[0]["status"] == "bad_input" and r.entries[0]["field"] == "path"


def test_replay_dump_with_python_backend():
    r = mv.replay(SHIPPED, numpy_verify.backend())
    assert r.ok, r
    d = r.dumps[0]
    assert d["exit_code"] == 0 and d["backend"] == "numpy-verify", d
    bad = mv.replay(SHIPPED, numpy_verify.backend(name="numpy-sm576", sm_scale=576 ** -0.5))
    assert bad.exit_code == 1 and "backend_vs_model" in bad.dumps[0], bad


def test_diagnose_names_the_misreading(tmp_path):
    from mlaverify_dump.synth import corrupt_dump
    made = corrupt_dump(SHIPPED, str(tmp_path), seed=SEED)["files"]
    rope = [m for m in made if m.get("cause") == "rope_first_cache"]
    assert rope, made
    path = rope[0]["file"]
    path = path if os.path.isabs(path) else os.path.join(tmp_path, path)
    dg = mv.diagnose(path)
    assert dg.exit_code == 1 and not dg.as_given_explains, dg
    assert "rope_first_cache" in dg.explaining, dg.raw
    clean = mv.diagnose(SHIPPED)
    assert clean.exit_code == 0 and clean.as_given_explains


def test_diagnose_bad_file_names_it(tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(mv.InvalidInput) as e:
        mv.diagnose(junk)
    assert "junk.safetensors" in str(e.value) or "q" in str(e.value), str(e.value)


# ---- a real pip install, used from outside the source tree --------------------------------------

def test_pip_install_bundles_the_library(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    env = dict(os.environ, MLAVERIFY_LIBRARY=mv.library_path())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "--target",
                    str(target), str(src)], check=True, env=env, cwd=tmp_path)
    assert (target / "mlaverify" / "_native" / "libmlaverify_c.so").is_file()
    env = {k: v for k, v in os.environ.items() if k != "MLAVERIFY_LIBRARY"}
    env["PYTHONPATH"] = str(target)
    code = ("import mlaverify as mv, mlaverify.dump, mlaverify_dump; print(mv.library_path()); "
            "r = mv.fuzz(mv.cpu(), cases=1, seed=3, properties=['vs_model']); print(r.verdict)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0].startswith(str(target)) and lines[-1] == "pass", out.stdout

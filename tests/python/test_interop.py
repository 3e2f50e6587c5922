"""The interoperability test: batches written by the Python package (an independent writer and an
independent float64 reference, python/mlaverify_dump/synth.py) replayed by the mlaverify binary.

Clean batches must replay green; each corrupted copy (cache rows read rope-first, mask_indptr
shifted by one, one output element changed, sm_scale 576^-0.5) must replay red on exactly the
requests the manifest names, at the element it names for one_element, and `diagnose` must name
the cause. MLAVERIFY_CLI is the binary (ctest sets it); without it the test fails rather than
skips, since an interop test that did not run is not a pass.
"""
import json
import os
import subprocess

import pytest

from mlaverify_dump.synth import corrupt_dump, synthesize

CLI = os.environ.get("MLAVERIFY_CLI")

# The reading diagnose reports for each corruption synth writes.
CAUSE_TO_READING = {
    "rope_first_cache": "rope_first_cache",
    "mask_indptr_shifted": "mask_indptr_shifted",
    "sm_scale_576": "sm_scale_576",
}


def far(distance):
    """A reading's distance from the as-given one, in bounds: null (infinite) or above 1."""
    return distance is None or distance > 1


def run(*args):
    assert CLI, "MLAVERIFY_CLI is not set: the interop test needs the mlaverify binary"
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = [os.path.join(ROOT, "scenarios", "dumps", n)
           for n in ("k2_eagle16.safetensors", "k2_padded.safetensors")]


@pytest.fixture(scope="module", params=["synth", "shipped"])
def batches(request, tmp_path_factory):
    """Synthesized batches with their corrupted copies, or the corrupted copies of the two
    shipped SGLang dumps (the real server data, with each bug's output written by Python)."""
    seed = int(os.environ.get("MLAV_SEED", "20261201")) % (2**31)
    out = tmp_path_factory.mktemp("interop_" + request.param)
    if request.param == "synth":
        synthesize(str(out), seed=seed)
        with open(out / "manifest.json") as f:
            return out, json.load(f)
    files = []
    for src in SHIPPED:
        files += corrupt_dump(src, str(out), seed=seed)["files"]
    return out, {"files": files}


def test_manifest_covers_every_corruption(batches):
    """Every corruption is present (the synth batch plan and both shipped dumps give each)."""
    _, manifest = batches
    causes = {f["cause"] for f in manifest["files"]}
    assert {"none", "rope_first_cache", "mask_indptr_shifted", "one_element",
            "sm_scale_576"} <= causes, causes


def test_replay_matches_manifest(batches):
    out, manifest = batches
    for f in manifest["files"]:
        path = str(out / f["file"])
        code, stdout, stderr = run("replay", "--json", path)
        assert code in (0, 1), f"{f['file']}: exit {code}: {stderr}{stdout}"
        report = json.loads(stdout)
        failing = sorted(r["request"] for r in report["server"]["requests"]
                         if not r["padded"] and not r["pass"])
        if f["expect"] == "pass":
            assert code == 0 and report["pass"], f"{f['file']} should replay green: {stdout}"
            assert failing == []
        else:
            assert code == 1 and not report["pass"], f"{f['file']} should replay red"
            uncertain = set(f.get("uncertain", []))
            assert set(failing) - uncertain == set(f["requests"]) - uncertain, (
                f"{f['file']} ({f['cause']}): red requests {failing}, manifest {f['requests']}")
        if f["cause"] == "one_element":
            req = report["server"]["requests"][f["where"]["request"]]
            assert req["elements_over"] == 1, req
            w = req["worst"]
            assert (w["token"], w["head"], w["column"]) == (
                f["where"]["token"], f["where"]["head"], f["where"]["column"]), (w, f["where"])


def test_diagnose_names_the_cause(batches):
    out, manifest = batches
    for f in manifest["files"]:
        path = str(out / f["file"])
        code, stdout, stderr = run("diagnose", "--json", path)
        assert code in (0, 1), f"{f['file']}: exit {code}: {stderr}{stdout}"
        report = json.loads(stdout)
        readings = report["readings"]
        if f["expect"] == "pass":
            assert code == 0 and report["as_given_explains"], f"{f['file']}: {report['verdict']}"
            continue
        assert code == 1 and not report["as_given_explains"], f"{f['file']}: {report['verdict']}"
        if f["cause"] == "one_element":
            # No reading explains a single corrupted element: diagnose must say so.
            assert not any(r.get("explains") for r in readings), report["verdict"]
            assert "no single reading explains" in report["verdict"], report["verdict"]
            continue
        want = CAUSE_TO_READING[f["cause"]]
        # JSON has no infinity: the binary writes an infinite distance (a row the reading
        # masks entirely, lse -inf against a finite one) as null.
        explaining = [r["name"] for r in readings
                      if r.get("explains") and far(r.get("distance_from_given", 0))]
        assert explaining and explaining[0] == want, (f["file"], explaining, report["verdict"])
        assert readings[1]["name"] == want, (f["file"], [r["name"] for r in readings[:3]])


def test_shipped_sglang_dumps_replay_green():
    for path in SHIPPED:
        code, stdout, stderr = run("replay", path)
        assert code == 0, stdout + stderr

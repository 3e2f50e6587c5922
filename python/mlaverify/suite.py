"""The suite from Python: fuzz campaigns, replay of scenarios and server dumps, diagnose of a
dump. Each runs in the library (props/, dump/) on the backend's mlav_backend table and returns
the JSON document the command line prints with --json, wrapped in an object to inspect.
"""

import ctypes
import json
import os
import tempfile

from . import _lib
from .backend import as_backend
from .errors import InvalidInput


class Failure:
    """One failing property of a campaign, shrunk. Fields: property, case_index (1-based),
    shrunk (the shrunk case's one-line summary), detail (what differed, where), file (the
    scenario file written: replay it with mlaverify.replay(file, backend) or `mlaverify replay`),
    shrink_steps, shrink_evals."""

    def __init__(self, d):
        self.raw = d
        self.property = d["property"]
        self.case_index = d["case_index"]
        self.shrunk = d["shrunk"]
        self.detail = d["detail"]
        self.file = d["file"] or None
        self.shrink_steps = d["shrink_steps"]
        self.shrink_evals = d["shrink_evals"]

    @property
    def scenario(self):
        """The scenario file's JSON (the shrunk case, its property, seed and backend)."""
        if not self.file:
            return None
        with open(self.file) as f:
            return json.load(f)

    def __str__(self):
        s = (f"{self.property} failed at case {self.case_index}, shrunk in {self.shrink_steps} "
             f"steps to {self.shrunk}: {self.detail}")
        return s + (f"\n  scenario: {self.file}" if self.file else "")

    __repr__ = __str__


class FuzzReport:
    """A campaign's result. ok: every selected property ran and none failed. failures: the
    Failure objects. stats: {property: {"passed", "failed", "skipped", "skip_reason"}}.
    not_verified: why the run is not green although nothing failed. coverage: a dict per field
    value ({"field", "value", "accepted", "cases"}: how many cases took it), coverage_missing:
    "field=value" for each accepted value no case took. raw: the JSON document."""

    def __init__(self, d):
        self.raw = d
        self.backend, self.seed, self.cases = d["backend"], d["seed"], d["cases"]
        self.cases_run, self.seconds = d["cases_run"], d["seconds"]
        self.verdict, self.exit_code = d["verdict"], d["exit_code"]
        self.stats = {s["property"]: {k: s[k] for k in ("passed", "failed", "skipped",
                                                        "skip_reason")} for s in d["stats"]}
        self.failures = [Failure(f) for f in d["failures"]]
        self.not_verified = list(d["not_verified"])
        self.coverage = list(d.get("coverage", []))
        self.coverage_missing = list(d.get("coverage_missing", []))
        self.out_dir = d.get("out_dir")

    @property
    def ok(self):
        return self.exit_code == 0

    def failure(self, prop):
        for f in self.failures:
            if f.property == prop:
                return f
        return None

    def __str__(self):
        lines = [f"fuzz {self.backend}: {self.cases_run} cases, seed {self.seed}, "
                 f"{self.seconds:.2f} s: {self.verdict}"]
        for name, s in self.stats.items():
            lines.append(f"  {name}: {s['passed']} passed, {s['failed']} failed, "
                         f"{s['skipped']} skipped")
        lines += ["FAILED " + str(f) for f in self.failures]
        lines += ["NOT VERIFIED: " + n for n in self.not_verified]
        return "\n".join(lines)

    __repr__ = __str__


class ReplayReport:
    """A replay's result: ok, exit_code, entries (one dict per scenario file: file, property,
    status pass/fail/skip/bad_input, detail, field, index, recorded), dumps (one `replay --json`
    document per server dump), raw."""

    def __init__(self, d):
        self.raw = d
        self.exit_code = d["exit_code"]
        sc = d.get("scenarios") or {}
        self.entries = list(sc.get("scenarios", []))  # `replay --json` names them scenarios
        self.dumps = list(d.get("dumps", []))
        self.not_verified = list(sc.get("not_verified", []))

    @property
    def ok(self):
        return self.exit_code == 0

    def __str__(self):
        lines = [f"replay: exit {self.exit_code}"]
        for e in self.entries:
            lines.append(f"  {e['status']:9s} {os.path.basename(e['file'])} "
                         f"[{e.get('property', '')}] {e.get('detail', '')}".rstrip())
        for dmp in self.dumps:
            lines.append(f"  dump {dmp.get('file', '?')}: exit {dmp.get('exit_code')}")
        lines += ["NOT VERIFIED: " + n for n in self.not_verified]
        return "\n".join(lines)

    __repr__ = __str__


class Diagnosis:
    """diagnose of a dump: as_given_explains, verdict (the one-paragraph answer), readings (one
    dict per reading: name, spec_class, description, applicable, explains, ...), best (the name
    of the best-explaining other reading, or None), raw."""

    def __init__(self, d):
        self.raw = d
        self.exit_code = d["exit_code"]
        self.file = d.get("file")
        self.as_given_explains = d.get("as_given_explains")
        self.verdict = d.get("verdict", d.get("error", {}).get("message") if "error" in d else "")
        self.readings = list(d.get("readings", []))

    @property
    def explaining(self):
        """Names of the readings (other than as_given) that explain the server's outputs."""
        return [r["name"] for r in self.readings
                if r.get("explains") and r["name"] != "as_given"]

    def __str__(self):
        return f"diagnose {self.file}: {self.verdict}"

    __repr__ = __str__


def _options(**kw):
    return json.dumps({k: v for k, v in kw.items() if v is not None}).encode()


def fuzz(backend, cases=100, seed=20261129, properties=None, out_dir=None, label=None,
         shard=None, verbose=False):
    """A fuzz campaign: `cases` random cases (from `seed`) through every property (or those named),
    each failure shrunk and written as a scenario file into out_dir (a fresh temporary folder when
    None, so a failure always has its file). Returns a FuzzReport; raises InvalidInput for an
    unknown property or bad options."""
    b = as_backend(backend)
    if out_dir is None:
        out_dir = tempfile.mkdtemp(prefix="mlaverify-fuzz-")
    os.makedirs(out_dir, exist_ok=True)
    if isinstance(properties, str):
        properties = [properties]
    opts = _options(cases=int(cases), seed=int(seed), properties=list(properties or []),
                    out_dir=str(out_dir), label=label or b.name, shard=shard,
                    verbose=bool(verbose))
    lib = _lib.library()
    doc = _lib.call_json(lib.mlav_fuzz, ctypes.byref(b.table()), opts)
    doc["out_dir"] = str(out_dir)
    return FuzzReport(doc)


def replay(paths, backend=None, allow_skipped=False, check_recorded=True, max_memory=None,
           max_seconds=None, verbose=False):
    """Replays scenario files (or folders of them) on `backend`, and server dumps (.safetensors)
    against the model (and `backend` when given). Returns a ReplayReport."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise InvalidInput("paths: nothing to replay")
    b = as_backend(backend) if backend is not None else None
    if b is None and any(not p.endswith(".safetensors") for p in paths):
        raise InvalidInput("backend: replaying scenario files needs a backend "
                           "(mlaverify.cpu(), a PythonBackend, ...)")
    opts = _options(paths=paths, allow_skipped=bool(allow_skipped),
                    check_recorded=bool(check_recorded), max_memory=max_memory,
                    max_seconds=max_seconds, verbose=bool(verbose))
    lib = _lib.library()
    table = ctypes.byref(b.table()) if b is not None else None
    return ReplayReport(_lib.call_json(lib.mlav_replay, table, opts))


def diagnose(path, readings=None, max_memory=None, max_seconds=None):
    """Diagnoses a server dump: the model re-run under every known wrong reading of its inputs,
    ranked by how well each explains the server's outputs. Returns a Diagnosis; a file that does
    not load raises InvalidInput naming the file and field."""
    opts = _options(readings=list(readings or []), max_memory=max_memory,
                    max_seconds=max_seconds)
    lib = _lib.library()
    doc = _lib.call_json(lib.mlav_diagnose, os.fspath(path).encode(), opts)
    return Diagnosis(doc)

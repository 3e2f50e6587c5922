"""The package's own PEP 517 build backend (pyproject.toml: backend-path = ["_build"]): the
standard library only, so `pip install ./python` works offline on any Python with pip, whatever
setuptools or wheel it has or lacks (the H200's system Python 3.12 venv has pip alone).

It builds one wheel: the packages listed in [tool.mlaverify] packages, the metadata of [project],
and libmlaverify_c.so bundled into mlaverify/_native/ from $MLAVERIFY_LIBRARY, else the checkout's
build/capi/ or .device/ (the wheel is then tagged for this platform; without a library it is
pure Python and says so: the package then finds the library at run time, mlaverify/_lib.py).
"""

import base64
import hashlib
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
LIBRARY = "libmlaverify_c.so"


def _pyproject():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            sys.exit("building mlaverify needs Python 3.11+ (tomllib) or the tomli package")
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _library():
    env = os.environ.get("MLAVERIFY_LIBRARY")
    if env:
        if not os.path.isfile(env):
            sys.exit(f"MLAVERIFY_LIBRARY={env}: no such file")
        return env
    for sub in ("build/capi", ".device"):
        path = os.path.join(os.path.dirname(HERE), sub, LIBRARY)
        if os.path.isfile(path):
            return path
    return None


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}", f"Summary: {project.get('description', '')}",
             f"Requires-Python: {project.get('requires-python', '>=3.8')}"]
    lic = project.get("license", {})
    if "text" in lic:
        lines.append(f"License: {lic['text']}")
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    text = "\n".join(lines) + "\n"
    readme = project.get("readme")
    if readme and os.path.isfile(os.path.join(HERE, readme)):
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            text += "Description-Content-Type: text/markdown\n\n" + f.read()
    return text


def _tag():
    import sysconfig
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{plat}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    conf = _pyproject()
    project = conf["project"]
    name, version = project["name"], project["version"]
    lib = _library()
    tag = _tag() if lib else "py3-none-any"
    dist_info = f"{name}-{version}.dist-info"
    files = []  # (archive name, bytes)
    for pkg in conf["tool"]["mlaverify"]["packages"]:
        root = os.path.join(HERE, pkg)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "_native"))
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    path = os.path.join(dirpath, fn)
                    with open(path, "rb") as f:
                        files.append((os.path.relpath(path, HERE).replace(os.sep, "/"), f.read()))
    if lib:
        with open(lib, "rb") as f:
            files.append((f"mlaverify/_native/{LIBRARY}", f.read()))
        files.append(("mlaverify/_native/SOURCE", (os.path.abspath(lib) + "\n").encode()))
        print(f"mlaverify: bundled {lib}", file=sys.stderr)
    else:
        print(f"mlaverify: no {LIBRARY} to bundle (set MLAVERIFY_LIBRARY or build capi/); the "
              "installed package will look for it at run time", file=sys.stderr)
    files.append((f"{dist_info}/METADATA", _metadata(project).encode("utf-8")))
    wheel = (f"Wheel-Version: 1.0\nGenerator: mlav_build\nRoot-Is-Purelib: "
             f"{'false' if lib else 'true'}\nTag: {tag}\n")
    files.append((f"{dist_info}/WHEEL", wheel.encode()))
    scripts = project.get("scripts", {})
    if scripts:
        text = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
        files.append((f"{dist_info}/entry_points.txt", text.encode()))
    record = []
    for arcname, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    wheel_name = f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name

"""Bundles libmlaverify_c.so into the package at install time (mlaverify/_native/), so an
installed package needs no build tree: from $MLAVERIFY_LIBRARY when set, else from the checkout's
build tree (../build/capi/, then ../.device/). Without one the package installs without it (and
says so); mlaverify then finds the library at run time (mlaverify/_lib.py).
Metadata is in pyproject.toml."""

import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "libmlaverify_c.so"


def find_library():
    env = os.environ.get("MLAVERIFY_LIBRARY")
    if env:
        if not os.path.isfile(env):
            sys.exit(f"MLAVERIFY_LIBRARY={env}: no such file")
        return env
    for sub in ("build/capi", ".device"):
        path = os.path.join(os.path.dirname(HERE), sub, NAME)
        if os.path.isfile(path):
            return path
    return None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = find_library()
        dest = os.path.join(self.build_lib, "mlaverify", "_native")
        if lib is None:
            print(f"mlaverify: no {NAME} to bundle (set MLAVERIFY_LIBRARY or build capi/); "
                  "the installed package will look for it at run time", file=sys.stderr)
            return
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(lib, os.path.join(dest, NAME))
        with open(os.path.join(dest, "SOURCE"), "w") as f:
            f.write(os.path.abspath(lib) + "\n")
        print(f"mlaverify: bundled {lib}", file=sys.stderr)


setup(cmdclass={"build_py": BuildPyWithLibrary})

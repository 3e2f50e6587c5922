#!/bin/bash
# One device call for the Python package: installs ./python offline into a venv over the system
# Python (torch, triton and numpy come from there), with libmlaverify_c.so bundled from the carried
# build (.device/, staged by scripts/device_build.sh), then runs tests/python/test_gpu_examples.py
# against the installed copy: the torch and Triton examples fuzzed through the CUDA path (green),
# their planted bugs (caught, shrunk, replayed), and the library's CUDA backend from Python.
# Logs and a summary go to $OUT. Exit 0 when the install worked and every GPU test passed.
#
#   on the dev machine:  scripts/device_build.sh            (stages .device/libmlaverify_c.so)
#   device tool:         run(command="scripts/device_python.sh", carry=[".device"])
# or, to carry the library alone (carry is 64 MiB in all; the .so is ~9 MB):
#   mkdir -p .device-py && cp build-cuda/capi/libmlaverify_c.so .device-py/
#   run(command="MLAVERIFY_LIBRARY=.device-py/libmlaverify_c.so scripts/device_python.sh",
#       carry=[".device-py"])
# Env: MLAVERIFY_LIBRARY (default .device/libmlaverify_c.so), PYTHON (default python3),
#      MLAV_GPU_CASES (default 20), MLAV_SEED.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/mlav_out}
mkdir -p "$OUT"
lib=$(realpath -m "${MLAVERIFY_LIBRARY:-.device/libmlaverify_c.so}")
py=${PYTHON:-python3}
venv=${MLAV_PY_VENV:-/tmp/mlav-pyvenv}
export MLAV_GPU_CASES=${MLAV_GPU_CASES:-20}
summary=$OUT/python_summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
status=0

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -2 | tee -a "$summary"
"$py" -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)' \
  2>&1 | tee -a "$summary"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' \
  2>&1 | tail -1 | tee -a "$summary"
"$py" -c 'import triton; print("triton", triton.__version__)' 2>&1 | tail -1 | tee -a "$summary"
if [ ! -f "$lib" ]; then
  say "device_python: $lib missing: run scripts/device_build.sh and carry .device"
  exit 2
fi
say "library: $lib ($(stat -c %s "$lib") bytes); ldd: $(ldd "$lib" | awk '/=>/{print $1}' | tr '\n' ' ')"

# The venv sees the system site-packages (torch, triton); pip comes from there if ensurepip is
# absent. --no-index: the device has no network, and --no-deps: numpy is there already.
rm -rf "$venv"
if ! "$py" -m venv --system-site-packages "$venv" >"$OUT/python_venv.log" 2>&1; then
  rm -rf "$venv"
  "$py" -m venv --system-site-packages --without-pip "$venv" >>"$OUT/python_venv.log" 2>&1 \
    || { say "device_python: cannot create a venv (see python_venv.log)"; exit 2; }
fi
vpy=$venv/bin/python
# When python3 is itself a venv (as on the device image), --system-site-packages reaches only the
# base interpreter's packages: a .pth file adds the caller's own site-packages (torch, numpy).
if ! "$vpy" -c 'import numpy' >/dev/null 2>&1; then
  site=$("$vpy" -c 'import site; print(site.getsitepackages()[0])')
  "$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    >"$site/mlav-parent-site.pth"
  say "venv: added the parent interpreter's site-packages ($(tr '\n' ' ' <"$site/mlav-parent-site.pth"))"
fi
rm -rf python/build python/*.egg-info
if MLAVERIFY_LIBRARY=$lib "$vpy" -m pip install --no-deps --no-build-isolation --no-index \
     --disable-pip-version-check ./python >"$OUT/python_install.log" 2>&1; then
  say "pip install ./python: ok"
  export MLAV_TEST_INSTALLED=1  # test the installed copy, its bundled library
  unset MLAVERIFY_LIBRARY
else
  say "pip install ./python: FAILED (python_install.log); testing the source tree instead"
  tail -5 "$OUT/python_install.log" | tee -a "$summary"
  status=1
  export MLAVERIFY_LIBRARY=$lib PYTHONPATH=$PWD/python
fi
(cd /tmp && "$vpy" -c 'import mlaverify as mv, json; print("mlaverify", mv.__version__, "at", mv.__file__); print("library", mv.library_path()); print("cuda", json.dumps(mv.info()["cuda"]))') \
  2>&1 | tee -a "$summary"

# The GPU tests: under pytest when the system Python has it, else the file's own runner.
log=$OUT/python_gpu_tests.log
if "$vpy" -c 'import pytest' 2>/dev/null; then
  timeout 540 "$vpy" -m pytest -p no:cacheprovider -q -rs -s tests/python/test_gpu_examples.py \
    >"$log" 2>&1
else
  timeout 540 "$vpy" tests/python/test_gpu_examples.py >"$log" 2>&1
fi
rc=$?
grep -E "^fuzz |^  [a-z_]+: [0-9]+ passed|FAILED|shrunk in|SKIPPED|skipped:|passed|failed|Error" "$log" \
  | head -80 | tee -a "$summary"
say "test_gpu_examples rc=$rc (log: python_gpu_tests.log)"
[ $rc -ne 0 ] && status=1
# On the GPU machine nothing may skip: a skipped test there checked nothing.
if grep -qE "(^| )[1-9][0-9]* skipped|: skipped" "$log"; then
  say "device_python: a GPU test skipped on the device (reason above): not a pass"
  status=1
fi
say "device_python: exit $status"
exit $status

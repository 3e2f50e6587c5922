#!/usr/bin/env bash
# Creates .venv (python3 -m venv) if missing and installs what the Python side needs: numpy,
# safetensors, pytest, ml_dtypes (tests only), setuptools and wheel, and ./python (the mlaverify
# package with the dump writer mlaverify_dump; it needs only numpy and safetensors, and bundles
# build/capi/libmlaverify_c.so when that exists: python/_build/mlav_build.py), each only if missing
# or, for ./python, changed since the last install. Idempotent; prints what it did.
# PYTHON=/path/to/python3 picks the interpreter (default python3). Needs PyPI on first run.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=.venv
if [ -x "$venv/bin/python" ]; then
  echo "venv: $venv exists ($("$venv/bin/python" --version 2>&1))"
else
  if ! "$py" -m venv "$venv" 2>/dev/null; then
    rm -rf "$venv"
    # Debian ships ensurepip separately (python3-venv); install it when we can.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
      echo "venv: installing python3-venv (python$ver-venv) with apt-get"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -qq --no-install-recommends python3-venv "python$ver-venv" \
        || apt-get install -y -qq --no-install-recommends python3-venv
      "$py" -m venv "$venv"
    else
      echo "venv: '$py -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  echo "venv: created $venv ($("$venv/bin/python" --version 2>&1))"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)

missing=()
# module:requirement:check (the check, when given, must print True)
# ml_dtypes is for the tests only: an independent bf16 rounding that ours is checked against.
for spec in "numpy:numpy" "safetensors:safetensors" "pytest:pytest" "ml_dtypes:ml_dtypes" "wheel:wheel" \
            "setuptools:setuptools>=64:int(setuptools.__version__.split('.')[0]) >= 64"; do
  IFS=: read -r mod req check <<<"$spec"
  "$venv/bin/python" -c "import $mod, sys; sys.exit(0 if (${check:-True}) else 1)" 2>/dev/null \
    || missing+=("$req")
done
if ((${#missing[@]})); then
  echo "venv: pip install ${missing[*]}"
  "${pip[@]}" install "${missing[@]}"
else
  echo "venv: numpy, safetensors, pytest, ml_dtypes, setuptools, wheel present"
fi

# ./python (the mlaverify package, with mlaverify_dump inside) is installed as a copy (not
# editable): reinstall when its sources change. It was once the distribution mlaverify-dump: a
# copy of that is removed first, so that two distributions never own the same files.
if "$venv/bin/python" -m pip --disable-pip-version-check show -q mlaverify-dump >/dev/null 2>&1; then
  echo "venv: pip uninstall mlaverify-dump (now part of the mlaverify distribution)"
  "${pip[@]}" uninstall -y mlaverify-dump
fi
stamp_file=$venv/.mlaverify.stamp
stamp=$(find python -type f \( -name '*.py' -o -name '*.toml' -o -name '*.md' \) \
          -not -path '*/build/*' -not -path '*.egg-info/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] \
   && "$venv/bin/python" -c "import mlaverify, mlaverify_dump" 2>/dev/null; then
  echo "venv: mlaverify up to date ($("$venv/bin/python" -c 'import mlaverify as m; print(m.__version__)'))"
else
  echo "venv: pip install ./python"
  "${pip[@]}" install --no-build-isolation --no-deps --force-reinstall ./python
  rm -rf python/build python/*.egg-info
  echo "$stamp" > "$stamp_file"
  echo "venv: installed mlaverify $("$venv/bin/python" -c 'import mlaverify as m; print(m.__version__)')"
fi
echo "venv: ready; run tests with: $venv/bin/python -m pytest tests/python"

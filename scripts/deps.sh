#!/usr/bin/env bash
# Installs the Debian packages mlaverify builds against, only those missing. Needs root (apt-get).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libeigen3-dev librapidcheck-dev libcli11-dev libgtest-dev
      libbenchmark-dev nlohmann-json3-dev libcairo2-dev pkg-config clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "deps: all present"
fi

#!/usr/bin/env bash
# Configures and builds mlaverify into build/ (CUDA backend too when nvcc is present).
# Usage: scripts/build.sh [target...]   (no target: everything)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${MLAV_JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" ${MLAV_CMAKE_ARGS:-}
fi
cmake --build build -j "$jobs" ${1:+--target "$@"}

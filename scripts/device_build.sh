#!/bin/bash
# Builds the CUDA binaries the device run needs and stages them in .device/ (ignored by git;
# carried to the GPU machine with the run tool's carry [".device"]). The device image has nvcc,
# CMake and ninja but not the -dev packages, so everything is built here, static in cudart, gtest
# and rapidcheck. Then, on the device: scripts/device_run.sh tests sanitize bench compare, and
# scripts/device_python.sh (the Python package over .device/libmlaverify_c.so).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f build-cuda/build.ninja ]; then
  # The warp-specialized kernel (MLAV_MMA2_RING=ws) is built as in the default build;
  # MLAV_WS_KERNEL=OFF in the environment leaves it out.
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLAV_WITH_CUDA=ON \
    -DMLAV_WS_KERNEL=${MLAV_WS_KERNEL:-ON} "${launcher[@]}"
fi
targets=(cuda_tests verify_bench racecheck_probe props_tests mlaverify mlaverify_c
         cuda_plugin_tests mlaverify_cuda_plugin mlav_test_fault_cuda_plugin
         mlaverify-plugin-worker)
ninja -C build-cuda -j "$(nproc)" "${targets[@]}"
mkdir -p .device
cp build-cuda/tests/cuda/cuda_tests build-cuda/bench/gpu/verify_bench \
  build-cuda/bench/gpu/racecheck_probe build-cuda/tests/props/props_tests build-cuda/cli/mlaverify \
  build-cuda/capi/libmlaverify_c.so .device/
# The CUDA plugin, the test plugin that loses its context, and the guarded worker, for
# cuda_plugin_tests on the device (run with MLAV_CUDA_PLUGIN=.device/libmlaverify_cuda_plugin.so
# MLAV_FAULT_CUDA_PLUGIN=.device/libmlav_test_fault_cuda_plugin.so
# MLAV_PLUGIN_WORKER=.device/mlaverify-plugin-worker).
cp build-cuda/tests/plugin/cuda_plugin_tests build-cuda/plugin/libmlaverify_cuda_plugin.so \
  build-cuda/tests/plugin/libmlav_test_fault_cuda_plugin.so \
  build-cuda/plugin/mlaverify-plugin-worker .device/
# The CLI's shared libraries beyond libc and libstdc++ (Cairo and what it pulls in: the device
# image has no -dev packages and may lack them); scripts/device_simulate.sh puts them on its path.
mkdir -p .device/lib
ldd .device/mlaverify | awk '$3 ~ /^\// { print $3 }' |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  xargs -r cp -L -t .device/lib
echo "staged in .device/ from $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'):"
ls -la .device

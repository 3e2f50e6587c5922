#!/bin/bash
# Builds and packs what call5.sh runs (.device is not in git): the default binaries and ring 4
# with exp2f (-DMLAV_EX2_FTZ=0 on the ring kernels' unit) as verify_bench_old.
#   bash bench/results/2026-12-06-v35/build5.sh   then the run tool with carry [".device/k5"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
LINK=tests/cuda/cuda_tests UNIT=verify_partial_s2 scripts/variant_bench.sh exp2f \
  cuda/verify_partial_s2.cu "-DMLAV_EX2_FTZ=0" | grep -E 'spill|error' | tr '\n' ' '
rm -rf /tmp/k5 && mkdir -p /tmp/k5 .device/k5
cp .device/verify_bench /tmp/k5/ && cp .device/verify_bench_exp2f /tmp/k5/verify_bench_old
tar czf .device/k5/bin.tgz -C /tmp/k5 .
ls -la .device/k5/bin.tgz

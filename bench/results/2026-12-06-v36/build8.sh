#!/bin/bash
# Builds and packs what call8.sh runs (.device is not in git): the default binaries and the wgmma
# kernel with ex2.approx.ftz (-DMLAV_WGMMA_EX2=1: verify_bench_wgex2, cuda_tests_wgex2), and a
# copy of the peer benchmark with the three mixed batches (v16f's diff) as .device/mixpeer.
#   bash bench/results/2026-12-06-v36/build8.sh   then carry [".device/k8", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
LINK=tests/cuda/cuda_tests scripts/variant_bench.sh wgex2 cuda/verify_partial_wgmma.cu \
  "-DMLAV_WGMMA_EX2=1" | grep -E 'spill|error' | tr '\n' ' '
rm -rf /tmp/k8 && mkdir -p /tmp/k8 .device/k8
cp .device/verify_bench .device/cuda_tests .device/verify_bench_wgex2 .device/cuda_tests_wgex2 /tmp/k8/
tar czf .device/k8/bin.tgz -C /tmp/k8 .
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k8/bin.tgz

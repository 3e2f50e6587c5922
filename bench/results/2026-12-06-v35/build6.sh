#!/bin/bash
# Builds and packs what call6.sh runs: ring 4 under v20c's tensor-rate emulation (every mma issued
# K times, timing only) with the per-phase trace, with ex2 (trK, the default) and with exp2f
# (trKx), K = 1, 2, 3. .device is not in git: run this in the checkout, then the run tool with
# carry [".device/k6"].
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
for k in 1 2 3; do
  UNIT=verify_partial_s2 scripts/variant_bench.sh tr$k cuda/verify_partial_s2.cu \
    "-DMLAV_MMA_TRACE -DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | tr '\n' ' '
  echo "<- tr$k"
  UNIT=verify_partial_s2 scripts/variant_bench.sh tr${k}x cuda/verify_partial_s2.cu \
    "-DMLAV_MMA_TRACE -DMLAV_MMA_REPEAT=$k -DMLAV_EX2_FTZ=0" | grep -E 'spill|error' | tr '\n' ' '
  echo "<- tr${k}x"
done
mkdir -p .device/k6
tar czf .device/k6/bin.tgz -C .device verify_bench verify_bench_tr{1,2,3} verify_bench_tr{1,2,3}x
ls -la .device/k6/bin.tgz

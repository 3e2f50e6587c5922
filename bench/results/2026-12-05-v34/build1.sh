#!/bin/bash
# Builds and packs what call1.sh runs (.device is not in git: a fresh checkout starts here).
#   bash bench/results/2026-12-05-v34/build1.sh   then the run tool with carry [".device/k1"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
v() {  # NAME UNIT FLAGS
  LINK=tests/cuda/cuda_tests UNIT=$2 scripts/variant_bench.sh "$1" "cuda/$2.cu" "$3" |
    grep -E 'spill|error' | tr '\n' ' '
  echo "<- $1"
}
v sync2 verify_partial_ws "-DMLAV_WS_SYNC2=1"
v pair verify_partial_ws "-DMLAV_WS_SPAIR=1"
v pairsync verify_partial_ws "-DMLAV_WS_SPAIR=1 -DMLAV_WS_SYNC2=1"
v ex2 verify_partial_ws "-DMLAV_EX2_FTZ=1"
v nosm verify_partial_ws "-DMLAV_WS_NO_SOFTMAX=1"
v r4ex2 verify_partial_s2 "-DMLAV_EX2_FTZ=1"
mkdir -p .device/k1
tar czf .device/k1/bin.tgz -C .device verify_bench verify_bench_{sync2,pair,pairsync,ex2,nosm,r4ex2} \
  cuda_tests_{sync2,pair,pairsync,ex2,r4ex2}
ls -la .device/k1/bin.tgz

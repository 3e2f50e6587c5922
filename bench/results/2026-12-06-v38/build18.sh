#!/bin/bash
# Builds and packs what call18.sh runs (staged for the next session's device time): the ws
# experiment's mbarrier form with its epilogue barrier uncounted (-DMLAV_WS_MBAR=1 at this
# commit: cuda_tests_wsM38, verify_bench_wsM38) and the shipped binaries.
#   bash bench/results/2026-12-06-v38/build18.sh   then carry [".device/k18"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_WS_KERNEL=ON MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
LINK=tests/cuda/cuda_tests UNIT=verify_partial_ws scripts/variant_bench.sh wsM38 \
  cuda/verify_partial_ws.cu "-DMLAV_WS_MBAR=1" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
echo "<- wsM38"
mkdir -p .device/k18
tar czf .device/k18/bin.tgz -C .device verify_bench cuda_tests cuda_tests_wsM38 verify_bench_wsM38
ls -la .device/k18/bin.tgz

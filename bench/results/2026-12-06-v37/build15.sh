#!/bin/bash
# Builds and packs what call15.sh runs (.device is not in git): the ws default (v30's form since
# v37) with mbarrier hand-overs (-DMLAV_WS_MBAR=1: 0 bytes of spill on sm_120a, 8 on sm_90a;
# the form racecheck can follow, NOTES v33) as cuda_tests and verify_bench (wsM1) and under v20c's
# emulation (wsM2, wsM3), beside the named-barrier default emulated (wsBf2, wsBf3: build13.sh's)
# and ring 4 (r4_2, r4_3: build12.sh's); the shipped verify_bench (call 14's build14.sh).
#   bash bench/results/2026-12-06-v37/build15.sh   then carry [".device/k15"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
export SM90_ONLY=1
LINK=tests/cuda/cuda_tests UNIT=verify_partial_ws scripts/variant_bench.sh wsM1 \
  cuda/verify_partial_ws.cu "-DMLAV_WS_MBAR=1" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
echo "<- wsM1"
for k in 2 3; do
  UNIT=verify_partial_ws scripts/variant_bench.sh wsM$k cuda/verify_partial_ws.cu \
    "-DMLAV_MMA_REPEAT=$k -DMLAV_WS_MBAR=1" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- wsM$k"
done
mkdir -p .device/k15
tar czf .device/k15/bin.tgz -C .device verify_bench cuda_tests_wsM1 verify_bench_wsM{1,2,3} \
  verify_bench_wsBf{2,3} verify_bench_r4_{2,3}
ls -la .device/k15/bin.tgz

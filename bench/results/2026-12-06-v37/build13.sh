#!/bin/bash
# Builds and packs what call13.sh runs (.device is not in git): the ws experiment with tile 0's
# slot read after each group's setmaxnreg (cuda/NOTES.md v37: its sm_120a spills in v30's form
# 80 -> 4 bytes, today's form's sm_90a object 44 -> 36), the shipped binaries (verify_bench,
# cuda_tests: ws in today's form), v30's form with the fix as cuda_tests and verify_bench
# (wsBf1) and under v20c's emulation (wsBf2, wsBf3), today's form with the fix emulated (wsAf2,
# wsAf3); beside them call 12's ring 4 and pre-fix builds (r4_2, r4_3, wsB1-3, wsA2-3; run
# build12.sh first).
#   bash bench/results/2026-12-06-v37/build13.sh   then carry [".device/k13"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
export SM90_ONLY=1
v30="-DMLAV_WS_VKEYS=64 -DMLAV_WS_SLAT=0 -DMLAV_WS_HANDOFF=0"
LINK=tests/cuda/cuda_tests UNIT=verify_partial_ws scripts/variant_bench.sh wsBf1 \
  cuda/verify_partial_ws.cu "$v30" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
echo "<- wsBf1"
for k in 2 3; do
  UNIT=verify_partial_ws scripts/variant_bench.sh wsBf$k cuda/verify_partial_ws.cu \
    "-DMLAV_MMA_REPEAT=$k $v30" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- wsBf$k"
  UNIT=verify_partial_ws scripts/variant_bench.sh wsAf$k cuda/verify_partial_ws.cu \
    "-DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- wsAf$k"
done
mkdir -p .device/k13
tar czf .device/k13/bin.tgz -C .device verify_bench cuda_tests cuda_tests_wsBf1 \
  verify_bench_wsBf{1,2,3} verify_bench_wsAf{2,3} verify_bench_r4_{2,3} verify_bench_wsB{1,2,3} \
  verify_bench_wsA{2,3}
ls -la .device/k13/bin.tgz

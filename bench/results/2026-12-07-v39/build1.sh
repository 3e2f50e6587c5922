#!/bin/bash
# Builds and packs what call3.sh and call2.sh run (.device is not in git): this commit's shipped
# binaries (the ring worked out in one assignment), the ws experiment's mbarrier forms at K = 1
# with their cuda_tests (wsM1: v38's per-thread arrivals, epilogue barrier uncounted; wsE1:
# MLAV_WS_MBAR=2, one arrival per warp), the same under v20c's emulation at K = 2 beside ring 4
# and the named-barrier form (r4_2, wsB2, wsM2, wsE2: timing only), and the three ws forms at
# K = 2 with the per-block trace (wsTB2, wsTM2, wsTE2: where the S and P.V warps wait per tile).
#   bash bench/results/2026-12-07-v39/build1.sh   then carry [".device/k1", ".device/k2"]
#   (call 3) or [".device/k1", ".device/mixpeer"] (call 2)
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_WS_KERNEL=ON MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
ws=cuda/verify_partial_ws.cu
v() {  # v NAME FLAGS: a ws variant (the spill lines of its compile, then its name)
  UNIT=verify_partial_ws scripts/variant_bench.sh "$1" $ws "$2" | grep -E 'spill|error' |
    sort | uniq -c | tr '\n' ' '
  echo "<- $1"
}
LINK=tests/cuda/cuda_tests v wsM1 "-DMLAV_WS_MBAR=1"
LINK=tests/cuda/cuda_tests v wsE1 "-DMLAV_WS_MBAR=2"
export SM90_ONLY=1
UNIT=verify_partial_s2 scripts/variant_bench.sh r4_2 cuda/verify_partial_s2.cu \
  "-DMLAV_MMA_REPEAT=2" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
echo "<- r4_2"
v wsB2 "-DMLAV_MMA_REPEAT=2"
v wsM2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=1"
v wsE2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=2"
v wsTB2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_TRACE"
v wsTM2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=1 -DMLAV_WS_TRACE"
v wsTE2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=2 -DMLAV_WS_TRACE"
mkdir -p .device/k1 .device/k2
tar czf .device/k1/bin.tgz -C .device verify_bench cuda_tests cuda_tests_wsM1 cuda_tests_wsE1 \
  verify_bench_wsM1 verify_bench_wsE1
tar czf .device/k2/bin.tgz -C .device verify_bench_r4_2 verify_bench_wsB2 \
  verify_bench_wsM2 verify_bench_wsE2 verify_bench_wsTB2 verify_bench_wsTM2 verify_bench_wsTE2
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k1/bin.tgz .device/k2/bin.tgz

#!/bin/bash
# v40 call 1: the ws mbarrier form with its last meeting on an mbarrier too (wsL: MLAV_WS_MBAR=1,
# "1 / l ready"). cuda_tests and racecheck (does racecheck now see no hazard in the ws form?),
# then one round at K = 2 (v20c's emulation: ring 4, ws named barriers, v39's per-thread form,
# wsL) and one at K = 1 (ring 4, ws named, wsL); memcheck of wsL1. On an H200 it then runs the
# README table (v39's call2.sh: our kernels, fa2 in both shapes, fa3) as its limit allows; on
# another GPU, a second K = 2 round.
#   bash bench/results/2026-12-07-v39/build1.sh && bash bench/results/2026-12-07-v40/build1.sh,
#   then carry [".device/k1", ".device/k4", ".device/mixpeer"]
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer, W, bench_round
call_n=1
O=/tmp/o1
B=/tmp/b1
rm -rf $O $B && mkdir -p $O $B
tar xzf .device/k1/bin.tgz -C $B
tar xzf .device/k4/bin.tgz -C $B
T0=$(date +%s)
left() { echo $(( ${LIMIT:-575} - ($(date +%s) - T0) )); }
k2_round() {
  MLAV_MMA2_RING=4 run_bench r4_K2_$1 mma2 uniform verify_bench_r4_2
  MLAV_MMA2_RING=ws run_bench wsB_K2_$1 mma2 uniform verify_bench_wsB2
  MLAV_MMA2_RING=ws run_bench wsM_K2_$1 mma2 uniform verify_bench_wsM2
  MLAV_MMA2_RING=ws run_bench wsL_K2_$1 mma2 uniform verify_bench_wsL2
  t "K2 round $1"
}
main() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsL1
  run_san racecheck wsL1 cuda_tests_wsL1 ws
  t racecheck
  pack
  k2_round 1
  MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsB_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsL_1 mma2 uniform verify_bench_wsL1
  t K1
  pack
  if [ $(left) -gt 100 ]; then run_san memcheck wsL1 cuda_tests_wsL1 ws 90; else echo "memcheck skipped: $(left) s left"; fi
  t memcheck
  pack
  unset MLAV_WS_ROUTE
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $(left) -gt 200 ]; then
    bench_round 1
    pack
    peer fa2
    pack
    if [ $(left) -gt 160 ]; then run_peer_sm120 $W; fi
    pack
    if [ $(left) -gt 235 ]; then peer fa3; else echo "fa3 skipped: $(left) s left"; fi
  elif [ $(left) -gt 60 ]; then
    export MLAV_WS_ROUTE=0
    k2_round 2
  fi
  t end
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v40 call 4 (staged for the next device time): the ws mbarrier form's remaining checks, then the
# K = 2 and K = 3 rounds for the card's K = 2.4. Runs, each step packed as it ends:
# the property suite on ws (MLAV_WS_ROUTE=0, a fresh MLAV_SEED) beside cuda_tests on ws (routed and
# not) and ring 4; racecheck on ws over the tests outside the 20 small ones, the death test left
# out (it stalled racecheck in v40's call 3); one round each of ring 4, ws mbarriers (L) and ws
# named barriers (B, -DMLAV_WS_MBAR=0) at K = 2 and K = 3, as the limit (LIMIT) allows.
#   bash bench/results/2026-12-07-v40/build2.sh, then carry [".device/k5"]
source scripts/device_call_lib.sh 5
O=/tmp/o5
call_n=4
rm -rf $O && mkdir -p $O
left() { echo $(( ${LIMIT:-575} - ($(date +%s) - T0) )); }
kround() {  # kround K: one round at K
  MLAV_MMA2_RING=4 run_bench r4_K$1 mma2 uniform verify_bench_r4_$1
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_bench wsL_K$1 mma2 uniform verify_bench_wsL$1
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_bench wsB_K$1 mma2 uniform verify_bench_wsB$1
  t "K$1"
}
main() {
  seed=$(( $(date +%s) % 1000000007 ))
  ( MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 MLAV_SEED=$seed timeout 240 \
      $B/props_tests --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
    echo "props ws MLAV_SEED=$seed rc=$?:" \
      "$(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | tr '\n' ' ')" ) &
  MLAV_MMA2_RING=ws run_tests mma2
  mv $O/tests_mma2.log $O/tests_ws_routed.log
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_tests mma2
  mv $O/tests_mma2.log $O/tests_ws_route0.log
  MLAV_MMA2_RING=4 run_tests mma2
  wait
  t tests
  pack
  MLAV_WS_ROUTE=0 SAN_FILTER="*-$SAN_FILTER:*DeathTest*" run_san racecheck ws_rest cuda_tests ws 200
  t racecheck
  pack
  kround 2
  pack
  if [ $(left) -gt 40 ]; then kround 3; fi
  t end
}
main 2>&1 | tee "$O/summary.txt"
finish

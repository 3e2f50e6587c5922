#!/bin/bash
# v39 call 3: the ws steps in one call, in order of need, each step packed as it ends (so a call
# cut off at its limit returns what ran):
# this commit's cuda_tests on ring 4 and wgmma, memcheck on ring 4; one round of ring 4 and the
# three ws forms (MLAV_WS_ROUTE=0) under v20c's emulation at K = 2, then at K = 1; the ws form with
# one mbarrier arrival per warp (wsE1): cuda_tests and racecheck; the three ws forms' per-block
# trace at K = 2; then, while the call's limit (LIMIT) allows, racecheck of v38's per-thread form
# (wsM1) and memcheck of wsE1.
#   bash bench/results/2026-12-07-v39/build1.sh, then carry [".device/k1", ".device/k2"]
source scripts/device_call_lib.sh 1
O=/tmp/o3
call_n=3
rm -rf $O && mkdir -p $O
tar xzf .device/k2/bin.tgz -C $B
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - T0) )); }
main() {
  MLAV_MMA2_RING=4 run_tests mma2
  run_tests wgmma
  run_san memcheck r4 cuda_tests 4
  t tests
  pack
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=4 run_bench r4_K2 mma2 uniform verify_bench_r4_2
  MLAV_MMA2_RING=ws run_bench wsB_K2 mma2 uniform verify_bench_wsB2
  MLAV_MMA2_RING=ws run_bench wsM_K2 mma2 uniform verify_bench_wsM2
  MLAV_MMA2_RING=ws run_bench wsE_K2 mma2 uniform verify_bench_wsE2
  t K2
  pack
  MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsB_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsM_1 mma2 uniform verify_bench_wsM1
  MLAV_MMA2_RING=ws run_bench wsE_1 mma2 uniform verify_bench_wsE1
  t K1
  pack
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsE1
  run_san racecheck wsE1 cuda_tests_wsE1 ws
  t racecheck
  pack
  for v in wsTB2 wsTM2 wsTE2; do
    MLAV_MMA2_RING=ws MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v \
      > $O/$v.txt 2>&1
    echo "$v rc=$?"
    grep WSTRACE $O/$v.txt | head -6
  done
  t trace
  pack
  if [ $(left) -gt 140 ]; then
    MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsM1
    run_san racecheck wsM1 cuda_tests_wsM1 ws
    pack
  else echo "racecheck wsM1 skipped: $(left) s left"; fi
  if [ $(left) -gt 120 ]; then run_san memcheck wsE1 cuda_tests_wsE1 ws; else echo "memcheck wsE1 skipped"; fi
  t end
}
main 2>&1 | tee "$O/summary.txt"
finish

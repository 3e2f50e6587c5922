#!/bin/bash
# v39 call 1: this commit's cuda_tests on ring 4 (the sm_120 configuration; host code changed:
# the ring in one assignment) and the wgmma kernel, memcheck on ring 4; the ws experiment's two
# mbarrier forms with every shape on ws (MLAV_WS_ROUTE=0): cuda_tests, racecheck (does it follow
# the uncounted epilogue barrier, v38's one displayed site, and the per-warp arrivals?) and
# memcheck; then one round of ring 4, the named-barrier ws form and both mbarrier forms at K = 1.
#   bash bench/results/2026-12-07-v39/build1.sh, then carry [".device/k1"]
source scripts/device_call_lib.sh 1
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
san() {  # san TOOL TAG BIN RING: compute-sanitizer over the filtered cuda_tests
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$4 timeout 130 compute-sanitizer --tool $1 \
    --error-exitcode 9 $B/$3 --gtest_filter="$filter" > $O/${1}_$2.log 2>&1
  echo "$1 $2 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/${1}_$2.log | tr '\n' ' ')"
  grep -E '^========= (Error|Race|Warning).*' $O/${1}_$2.log | sort | uniq -c | sort -rn | head -3
  grep -m3 -E '^=========     at .*verify_partial' $O/${1}_$2.log
}
main() {
  MLAV_MMA2_RING=4 run_tests mma2
  run_tests wgmma
  san memcheck r4 cuda_tests 4
  t tests
  pack
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsM1
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsE1
  san racecheck wsM1 cuda_tests_wsM1 ws
  pack
  san racecheck wsE1 cuda_tests_wsE1 ws
  pack
  san memcheck wsE1 cuda_tests_wsE1 ws
  t sanitizers
  pack
  MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsB_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsM_1 mma2 uniform verify_bench_wsM1
  MLAV_MMA2_RING=ws run_bench wsE_1 mma2 uniform verify_bench_wsE1
  t bench
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v38 call 18 (staged, not yet run): does racecheck come clean on the ws mbarrier form once its
# epilogue barrier has no thread count (v38: the 100 reports displayed with the count were all
# there)? cuda_tests and racecheck, then memcheck, with MLAV_WS_ROUTE=0 (every shape runs ws);
# then one round of its time beside the named-barrier form and ring 4 (K = 1).
#   bash bench/results/2026-12-06-v38/build18.sh, then carry [".device/k18"]
source scripts/device_call_lib.sh 18
main() {
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsM38
  for tool in racecheck memcheck; do
    MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 150 compute-sanitizer --tool $tool \
      --error-exitcode 9 $B/cuda_tests_wsM38 --gtest_filter="$filter" > $O/${tool}_wsM38.log 2>&1
    echo "$tool wsM38 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/${tool}_wsM38.log | tr '\n' ' ')"
  done
  t tests
  MLAV_MMA2_RING=4 run_bench r4_uni_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws0_uni_1 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsM38_uni_1 mma2 uniform verify_bench_wsM38
  t bench
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v37 call 15: the ws default with mbarrier hand-overs (build15.sh): cuda_tests, memcheck and
# racecheck (MLAV_WS_ROUTE=0, so every shape runs ws), then its time beside the named-barrier
# default and ring 4 at K = 1, 2, 3 (uniform plan, one round; ROUND2=2 adds a second: the
# session had ~500 s of device time left).
#   carry [".device/k15"]
source scripts/device_call_lib.sh 15
main() {
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_tests mma2 cuda_tests_wsM1
  for tool in memcheck racecheck; do
    MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 timeout 150 compute-sanitizer \
      --tool $tool --error-exitcode 9 $B/cuda_tests_wsM1 --gtest_filter="$filter" > $O/$tool.log 2>&1
    echo "$tool wsM rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/$tool.log | tr '\n' ' ')"
  done
  t tests
  export MLAV_WS_ROUTE=0
  for r in 1 ${ROUND2:-}; do
    MLAV_MMA2_RING=4 run_bench r4_1_$r mma2 uniform
    MLAV_MMA2_RING=ws run_bench wsBf1_$r mma2 uniform
    MLAV_MMA2_RING=ws run_bench wsM1_$r mma2 uniform verify_bench_wsM1
    for k in 2 3; do
      MLAV_MMA2_RING=4 run_bench r4_${k}_$r mma2 uniform verify_bench_r4_$k
      MLAV_MMA2_RING=ws run_bench wsBf${k}_$r mma2 uniform verify_bench_wsBf$k
      MLAV_MMA2_RING=ws run_bench wsM${k}_$r mma2 uniform verify_bench_wsM$k
    done
    t "round $r"
  done
}
main 2>&1 | tee "$O/summary.txt"
finish

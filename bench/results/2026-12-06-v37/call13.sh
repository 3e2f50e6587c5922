#!/bin/bash
# v37 call 13: the ws experiment with tile 0's slot read after setmaxnreg (build13.sh): its CUDA
# tests and memcheck in today's form (the shipped ws object) and in v30's form (wsBf1); then
# both forms before and after the change, K = 1, 2, 3 under v20c's emulation, beside ring 4
# (uniform plan, two rounds interleaved).
#   carry [".device/k13"]
source scripts/device_call_lib.sh 13
main() {
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  MLAV_MMA2_RING=ws run_tests mma2
  MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsBf1
  for b in cuda_tests cuda_tests_wsBf1; do
    MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 300 compute-sanitizer --tool memcheck \
      --error-exitcode 9 "$B/$b" --gtest_filter="$filter" > "$O/memcheck_$b.log" 2>&1
    echo "memcheck $b rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$O/memcheck_$b.log" | tr '\n' ' ')"
  done
  t tests
  for r in 1 2; do
    for k in 1 2 3; do
      if [ $k = 1 ]; then
        MLAV_MMA2_RING=4 run_bench r4_${k}_$r mma2 uniform
        MLAV_MMA2_RING=ws run_bench wsAf${k}_$r mma2 uniform
        MLAV_MMA2_RING=ws run_bench wsBf${k}_$r mma2 uniform verify_bench_wsBf1
        MLAV_MMA2_RING=ws run_bench wsB${k}_$r mma2 uniform verify_bench_wsB1
      else
        MLAV_MMA2_RING=4 run_bench r4_${k}_$r mma2 uniform verify_bench_r4_$k
        for f in wsAf wsBf wsA wsB; do
          MLAV_MMA2_RING=ws run_bench $f${k}_$r mma2 uniform verify_bench_$f$k
        done
      fi
    done
    t "round $r"
  done
}
main 2>&1 | tee "$O/summary.txt"
finish

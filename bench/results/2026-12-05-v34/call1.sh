#!/bin/bash
# v34 call 1: the hand-overs as bar.sync on both sides (sync2: -DMLAV_WS_SYNC2=1), the S warps
# meeting once per two chunks (pair: -DMLAV_WS_SPAIR=1) and both (pairsync): cuda_tests on each,
# racecheck on sync2 and pairsync (the sanitizer set), two interleaved rounds beside ring 4 and
# the ws default (uniform plan).
source scripts/device_call_lib.sh 1
for v in sync2 pair pairsync; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
t tests
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for v in sync2 pairsync; do
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 150 compute-sanitizer --tool racecheck \
    --error-exitcode 9 $B/cuda_tests_$v --gtest_filter="$filter" > $O/san_racecheck_$v.log 2>&1
  echo "racecheck $v rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_racecheck_$v.log | head -3 | tr '\n' ' ')"
  t racecheck_$v
done
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in sync2 pair pairsync; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
finish

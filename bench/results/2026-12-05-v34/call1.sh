#!/bin/bash
# v34 call 1: the hand-overs as bar.sync on both sides (sync2: -DMLAV_WS_SYNC2=1), the S warps
# meeting once per two chunks (pair: -DMLAV_WS_SPAIR=1), both (pairsync), the softmax's 2^x as
# ex2.approx.ftz on ws (ex2) and on ring 4 (r4ex2: -DMLAV_EX2_FTZ=1), and the timing-only
# build without the softmax (nosm: -DMLAV_WS_NO_SOFTMAX=1). cuda_tests on the five real forms;
# two interleaved rounds beside ring 4 and the ws default (uniform plan); racecheck on sync2 and
# pairsync (the sanitizer set); ncu of pair on tree32 (the S warps' stalls, against v33's call 1).
source scripts/device_call_lib.sh 1
for v in sync2 pair pairsync ex2; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
MLAV_MMA2_RING=4 run_tests mma2 cuda_tests_r4ex2
t tests
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench r4ex2_$r mma2 uniform verify_bench_r4ex2
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in sync2 pair pairsync ex2 nosm; do
    MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v
  done
done
t bench
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
# The call has 600 s and finish must run within them: a racecheck (at most 120 s) starts only
# before 330 s, ncu (at most 90 s, then its two exports) only before 450 s.
for v in sync2 pairsync; do
  [ $(( $(date +%s) - T0 )) -gt 330 ] && { echo "racecheck $v skipped (time)"; continue; }
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 120 compute-sanitizer --tool racecheck \
    --error-exitcode 9 $B/cuda_tests_$v --gtest_filter="$filter" > $O/san_racecheck_$v.log 2>&1
  echo "racecheck $v rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_racecheck_$v.log | head -3 | tr '\n' ' ')"
  t racecheck_$v
done
if [ $(( $(date +%s) - T0 )) -gt 450 ]; then echo "ncu skipped (time)"; finish; exit 0; fi
MLAV_MMA2_RING=ws run_ncu pair mma2 verify_bench_pair v3-tp8-tree32
t ncu
finish

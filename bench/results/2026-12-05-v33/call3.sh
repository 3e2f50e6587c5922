#!/bin/bash
# v33 call 3: the S steps' remaining stalls after ROW_EARLY=1 (call 2's ncu): the table read now
# waits for the previous copy's address registers (long scoreboard) and its result is waited for
# (IADD3), the HMMAs wait for the K fragments' ldmatrix queued behind the copies. Variants of the
# ws default (ROW_EARLY=1): wse2 (-DMLAV_WS_ROW_EARLY=2: the step before reads the table after its
# issue), wslf (-DMLAV_WS_LDSM_FIRST=1: K fragments before the copy's issue), wse2lf (both),
# wss0 (-DMLAV_WS_SLAT=0: the row held in registers across the tile, v30's loader state).
# cuda_tests on wse2 and wslf, then two interleaved rounds (uniform plan) beside ring 4.
source scripts/device_call_lib.sh 7
for v in wse2 wslf; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
t tests
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in wse2 wslf wse2lf wss0; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
finish

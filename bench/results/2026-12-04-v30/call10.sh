#!/bin/bash
# v30 call 10: the benchmark at cbc337a (the ws experiment built in; the default kernels unchanged):
# ring 4 and ws alternated twice under the uniform plan, then both under the balanced plan once.
source scripts/device_call_lib.sh 10
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_u$r mma2 uniform verify_bench_ws
  MLAV_MMA2_RING=ws run_bench ws_u$r mma2 uniform verify_bench_ws
done
MLAV_MMA2_RING=4 run_bench r4_b mma2 balanced verify_bench_ws
MLAV_MMA2_RING=ws run_bench ws_b mma2 balanced verify_bench_ws
t bench
finish

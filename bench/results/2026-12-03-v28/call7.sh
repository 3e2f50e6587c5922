#!/bin/bash
# Session 17, call 7: the copy warpgroup under the balanced plan, which serves the mixed batches
# where it gains most (call 1 had one round): two interleaved rounds beside the kernel, mma2.
source scripts/device_call_lib.sh 7
for round in 1 2; do
  run_bench base_bal_$round mma2 balanced
  run_bench cw_bal_$round mma2 balanced verify_bench_cw
done
t bench
finish

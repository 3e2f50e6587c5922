#!/bin/bash
# v35 call 5: with ex2 the default, is ring 4 still the best ring? Rings 2 (plain), 3 and 4 of the
# new default beside the old ring 4, uniform plan; and the balanced plan (the benchmark's
# default, the mixed batches' table) for the old and new ring 4. verify_bench_old: ring 4 with exp2f.
#   bash bench/results/2026-12-06-v35/build5.sh, then carry [".device/k5"] (not run in v35: the
#   session's device time ran out)
source scripts/device_call_lib.sh 5
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench old_r4_$r mma2 uniform verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=3 run_bench r3_$r mma2 uniform
  MLAV_MMA2_RING=2 MLAV_MMA2_L1=0 run_bench r2_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench old_r4_bal_$r mma2 balanced verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_bal_$r mma2 balanced
done
t bench
finish

#!/bin/bash
# v36 call 7: v35's staged calls 5 and 6 in one call, plus the README table's columns.
#  1. call 6: ring 4's per-phase cycles per tile under v20c's emulation of the card's slower
#     tensor cores (every mma issued K = 1, 2, 3 times), ex2 (trK) against exp2f (trKx), for
#     the card's prediction measured instead of v35's arithmetic.
#  2. call 5: rings 2, 3, 4 with ex2 beside the old ring 4 (exp2f), uniform plan; ring 4 old and
#     new under the balanced plan; with mma6 and wgmma in each round (the README table).
#  3. FlashInfer fa2 (228 KB shape) on the six, in the same call.
#   bash bench/results/2026-12-06-v36/build7.sh, then carry [".device/k7", ".device/peer"]
source scripts/device_call_lib.sh 7
for k in 1 2 3; do
  MLAV_MMA2_RING=4 run_trace tr$k
  MLAV_MMA2_RING=4 run_trace tr${k}x
done
t trace
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench old_r4_$r mma2 uniform verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=3 run_bench r3_$r mma2 uniform
  MLAV_MMA2_RING=2 MLAV_MMA2_L1=0 run_bench r2_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench old_r4_bal_$r mma2 balanced verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_bal_$r mma2 balanced
  run_bench mma6_$r mma6 uniform
  run_bench wgmma_$r wgmma uniform
done
t bench
if [ $(( $(date +%s) - T0 )) -lt 400 ]; then
  run_peer 180
  t peer
else
  echo "peer skipped (time)"
fi
finish

#!/bin/bash
# v30 call 13: the card's balance emulated (every mma issued k = 2, 3 times; timing-only) for the
# ws experiment's final form (P over the S ring, 6 + 2; kernel of f4c5fda, built at 1fe64ac) beside ring
# 4 (call 4's builds, the default kernel unchanged since). Uniform plan, one round.
source scripts/device_call_lib.sh 13
for k in 2 3; do
  MLAV_MMA2_RING=4 run_bench r4rep$k mma2 uniform verify_bench_r4rep$k
  MLAV_MMA2_RING=ws run_bench wspr$k mma2 uniform verify_bench_wspr$k
done
t bench
finish

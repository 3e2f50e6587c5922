#!/bin/bash
# v30 call 4: the RTX PRO 6000's slower tensor cores emulated (v20c's MLAV_MMA_REPEAT=k: every
# mma issued k times; timing-only) for ring 4, ws (3 + 3 chunks, the sm_120 budget) and ws with
# rings of 6 (timing-only, past the budget): which design the card's balance favours. Uniform
# plan, one round each.
source scripts/device_call_lib.sh 4
MLAV_MMA2_RING=4 run_bench r4 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws mma2 uniform
for k in 2 3; do
  MLAV_MMA2_RING=4 run_bench r4rep$k mma2 uniform verify_bench_r4rep$k
  MLAV_MMA2_RING=ws run_bench wsrep$k mma2 uniform verify_bench_wsrep$k
  MLAV_MMA2_RING=ws run_bench ws6rep$k mma2 uniform verify_bench_ws6rep$k
done
t bench
finish

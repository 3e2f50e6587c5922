#!/bin/bash
# v30 call 3 (timing-only builds past the sm_120 budget, MLAV_WS_STAGES=n: both rings n chunks of
# 4 KB deep): is the ws kernel's copy cost its bytes in flight (8 KB per group in the shipped
# ring of 3)? Uniform plan, one round.
source scripts/device_call_lib.sh 3
MLAV_MMA2_RING=ws run_bench ws3 mma2 uniform
for n in 4 6 8; do MLAV_MMA2_RING=ws run_bench ws$n mma2 uniform verify_bench_st$n; done
MLAV_MMA2_RING=ws MLAV_MMA2_L1=4 run_bench ws6_l1_4 mma2 uniform verify_bench_st6
t bench
finish

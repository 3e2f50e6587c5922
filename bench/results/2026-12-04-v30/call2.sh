#!/bin/bash
# v30 call 2: the ws kernel's rings with L1 prefetch (MLAV_MMA2_L1=4 and 8: each group prefetches
# into L1 the chunk 4 or 8 past the one it copies, copies through L1), and the timing-only build
# without chunk copies (MLAV_WS_NO_COPY=1, garbage results): what the design gives without its
# L2 latency. cuda_tests on ws with L1 4; uniform plan, one round.
source scripts/device_call_lib.sh 2
MLAV_MMA2_RING=ws MLAV_MMA2_L1=4 run_tests mma2
t tests
MLAV_MMA2_RING=4 run_bench r4 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws mma2 uniform
MLAV_MMA2_RING=ws MLAV_MMA2_L1=4 run_bench ws_l1_4 mma2 uniform
MLAV_MMA2_RING=ws MLAV_MMA2_L1=8 run_bench ws_l1_8 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws_nocopy mma2 uniform verify_bench_nocopy
t bench
finish

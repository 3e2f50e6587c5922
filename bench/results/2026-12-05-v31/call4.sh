#!/bin/bash
# v31 call 4: v30's form rebuilt from v31's code (MLAV_WS_HANDOFF=0, MLAV_WS_QL1=0, S 136:
# the PV warps' own loader, V ring 2 x 4 KB): cuda_tests, and one round beside call 3's ws0
# (v30's build) and ring 4, uniform plan.
source scripts/device_call_lib.sh 4
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_ws30
t tests
MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws0_1 mma2 uniform verify_bench_ws0
MLAV_MMA2_RING=ws run_bench ws30_1 mma2 uniform verify_bench_ws30
t bench
finish

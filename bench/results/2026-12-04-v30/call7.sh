#!/bin/bash
# v30 call 7: the ws kernel with rings of 4 (S) + 2 (V) chunks, Q's A fragments loaded before
# each step's wait and barrier (MLAV_WS_HOIST=1) or after it, S warps at 128 / 136 / 144
# registers (PV warps 184 / 176 / 168; every build spills somewhere, see NOTES v30): cuda_tests on
# the staged build (4 + 2, hoisted, S 128), then one round of each beside ring 4, uniform plan.
source scripts/device_call_lib.sh 7
MLAV_MMA2_RING=ws run_tests mma2
t tests
MLAV_MMA2_RING=4 run_bench r4 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws_h1s128 mma2 uniform
for v in h0s128 h0s136 h1s136 h1s144; do MLAV_MMA2_RING=ws run_bench ws_$v mma2 uniform verify_bench_$v; done
t bench
finish

#!/bin/bash
# v30 call 1: the warp-specialized sm_120 kernel (MLAV_MMA2_RING=ws; S warps 128 / PV warps 184
# registers; this experiment build's sm_90a object spills 28 bytes, so the build gate was set to
# warn): cuda_tests on it, then ring 4 and ws alternated twice under the uniform plan.
source scripts/device_call_lib.sh 1
MLAV_MMA2_RING=ws run_tests mma2
grep -E "Failure|Expected|actual|max_abs|mismatch" "$O/tests_mma2.log" | head -12
t tests
for round in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_u$round mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_u$round mma2 uniform
done
t bench
finish

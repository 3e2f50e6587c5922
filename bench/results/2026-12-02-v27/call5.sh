#!/bin/bash
# Session 16, call 5: MLAV_COPY_LATE=1 (call 4's build) on the other mma.sync configurations it
# would change as a default: mma6 (228 KB, 6 stages), mma2's ring 3 with L1 staging
# (MLAV_MMA2_RING=3 MLAV_MMA2_L1=2) and ring 3 plain; two rounds against the kernel, uniform plan.
# The one binary holds every mma.sync instantiation (verify_partial_s2.cu).
source scripts/device_call_lib.sh 5
for round in 1 2; do
  run_bench mma6_base_$round mma6 uniform
  run_bench mma6_late1_$round mma6 uniform verify_bench_late1
  MLAV_MMA2_RING=3 MLAV_MMA2_L1=2 run_bench r3l1_base_$round mma2 uniform
  MLAV_MMA2_RING=3 MLAV_MMA2_L1=2 run_bench r3l1_late1_$round mma2 uniform verify_bench_late1
  MLAV_MMA2_RING=3 run_bench r3_base_$round mma2 uniform
  MLAV_MMA2_RING=3 run_bench r3_late1_$round mma2 uniform verify_bench_late1
done
t bench
finish

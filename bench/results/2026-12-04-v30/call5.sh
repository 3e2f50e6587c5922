#!/bin/bash
# v30 call 5: the math-only loops (timing-only builds, no chunk copies, garbage results) of ring 4
# (MLAV_NO_KV_LOAD=1) and ws (MLAV_WS_NO_COPY=1) at the H200's tensor rate and with every mma
# issued k = 2, 3 times (v20c's emulation of the RTX PRO 6000's slower tensor cores): the two
# designs' loops as the card would run them with its copies hidden. Uniform plan, one round.
source scripts/device_call_lib.sh 5
for k in 1 2 3; do
  MLAV_MMA2_RING=4 run_bench r4nc$k mma2 uniform verify_bench_r4nc$k
  MLAV_MMA2_RING=ws run_bench wsnc$k mma2 uniform verify_bench_wsnc$k
done
t bench
finish

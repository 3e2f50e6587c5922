#!/bin/bash
# v35 call 6 (staged for a session with device time; wants an H200, where v20c ran): the card's
# prediction for ring 4 with ex2, measured instead of v35's arithmetic. Ring 4's per-phase cycles
# per tile (S / softmax / PV / tile) under v20c's emulation of the card's slower tensor cores
# (K = 1, 2, 3), with ex2 (trK) and with exp2f (trKx); interpolate at K = 2.4 as v20c did.
#   bash bench/results/2026-12-06-v35/build6.sh, then carry [".device/k6"]
source scripts/device_call_lib.sh 6
for k in 1 2 3; do
  MLAV_MMA2_RING=4 run_trace tr$k
  MLAV_MMA2_RING=4 run_trace tr${k}x
done
t trace
finish

#!/bin/bash
# v35 call 4: the new sm_120 default (ex2) beside the old (exp2f, verify_bench_old), the ws
# experiment, the 6-stage kernel (exp2f: verify_bench_old's mma6 is the shipped one), the wgmma
# kernel and FlashInfer fa2 (228 KB shape) on the six, two rounds; call 3's binaries.
#   carry [".device/k4", ".device/peer"]   (.device/k4 is a copy of .device/k3)
source scripts/device_call_lib.sh 4
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench old_r4_$r mma2 uniform verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  run_bench mma6_$r mma6 uniform verify_bench_old
  run_bench wgmma_$r wgmma uniform
done
t bench
run_peer 200
t peer
finish

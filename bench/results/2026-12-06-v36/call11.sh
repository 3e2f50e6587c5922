#!/bin/bash
# v36 call 11 (call 10's content, which found no machine, plus what an H200 would add): the
# property suite on the CUDA backend with a fresh MLAV_SEED on the wgmma kernel and the sm_120
# default, both at once (CPU-bound); then, on whatever GPU came, the README's table beside the
# same call's peers: ring 4, mma6 and wgmma (uniform plan, two rounds), FlashInfer fa2 (228 KB
# shape) on the six; and ring 4's per-phase trace under the tensor-rate emulation (K = 1, 2, 3,
# ex2 and exp2f, call 7's builds) for the card's prediction on this GPU.
#   k11: build9.sh's verify_bench and props_tests with build7.sh's trace builds (packed by hand),
#   then carry [".device/k11", ".device/peer"] (k9 + k7 + peer is over the 64 MiB carry)
source scripts/device_call_lib.sh 11
seed=$(( $(date +%s) % 1000000007 ))
for k in wgmma mma2; do
  ( MLAV_CUDA_KERNEL=$k MLAV_SEED=$seed timeout 200 $B/props_tests \
      --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_$k.log 2>&1
    echo "props $k MLAV_SEED=$seed rc=$?: $(grep -E '^\[  (PASSED|FAILED) |^\[       OK \] Backends.*Campaign' $O/props_$k.log | head -3 | tr '\n' ' ')" ) &
done
wait
t props
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  run_bench mma6_$r mma6 uniform
  run_bench wgmma_$r wgmma uniform
done
t bench

for k in 1 2 3; do
  MLAV_MMA2_RING=4 run_trace tr$k
  MLAV_MMA2_RING=4 run_trace tr${k}x
done 2>&1 | grep -v MMATRACE
t trace
if [ $(( $(date +%s) - T0 )) -lt 300 ]; then
  run_peer 120
  t peer
else
  echo "peer skipped (time)"
fi
finish

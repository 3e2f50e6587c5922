#!/bin/bash
# v36 call 9: (1) the wgmma kernel's new default (ex2.approx.ftz): cuda_tests on every kernel,
# the property suite on the CUDA backend with a fresh seed (wgmma and the sm_120 default),
# memcheck and racecheck of the wgmma kernel; (2) the card's balance for today's ws form, never
# emulated before: ring 4 and the ws default under v20c's emulation (every mma issued K = 2, 3
# times; timing only), two interleaved rounds, with K = 1 (the real builds) beside them.
#   bash bench/results/2026-12-06-v36/build9.sh, then carry [".device/k9"]
source scripts/device_call_lib.sh 9
for k in wgmma mma2 mma6; do run_tests $k; done
MLAV_MMA2_RING=ws run_tests mma2
t tests
seed=$(( $(date +%s) % 1000000007 ))
for k in wgmma mma2; do
  MLAV_CUDA_KERNEL=$k RC_PARAMS="seed=$seed" timeout 100 $B/props_tests \
    --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_$k.log 2>&1
  echo "props $k seed $seed rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_$k.log | head -3 | tr '\n' ' ')"
done
t props
f='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for tool in memcheck racecheck; do
  MLAV_CUDA_KERNEL=wgmma timeout 110 compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/cuda_tests --gtest_filter="$f" > $O/san_${tool}_wgmma.log 2>&1
  echo "$tool wgmma rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_${tool}_wgmma.log | head -3 | tr '\n' ' ')"
done
t sanitizers
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_k1_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_k1_$r mma2 uniform
  for k in 2 3; do
    MLAV_MMA2_RING=4 run_bench r4_k${k}_$r mma2 uniform verify_bench_rep$k
    MLAV_MMA2_RING=ws run_bench ws_k${k}_$r mma2 uniform verify_bench_wsrep$k
  done
done
t bench
finish

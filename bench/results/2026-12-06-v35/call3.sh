#!/bin/bash
# v35 call 3: ex2.approx.ftz as the default softmax 2^x (MLAV_EX2_FTZ=1; call 1 measured ring 4
# 5-6% faster with it on an H100). The new default's cuda_tests on ring 4 (the sm_120 default),
# ws, mma6 and wgmma; the property suite on the CUDA backend (mma2, fresh seed); memcheck and
# racecheck of the sm_120 default; the racecheck probe with producer/consumer-only barriers
# beside the hand-overs (sync_partial); two rounds of the old default (verify_bench_old, c73eaf1's
# kernels) against the new one, ring 4 and ws, beside the rescale skipped where every factor of
# a warp's rows is 1 (skip: -DMLAV_SKIP_UNIT_SCALE=1) and that with a lazy running maximum
# (lazy: -DMLAV_LAZY_MAX=8 on top), ring 4 with the scaling folded into the power's FFMA (r4fma:
# -DMLAV_SOFTMAX_FMA=1) and that with the skip (r4fmaskip); cuda_tests of lazy and fma builds; FlashInfer fa2 (228 KB
# shape) on the six if time.
#   carry [".device/k3", ".device/peer"]
source scripts/device_call_lib.sh 3
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench old_r4_$r mma2 uniform verify_bench_old
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench r4skip_$r mma2 uniform verify_bench_r4skip
  MLAV_MMA2_RING=4 run_bench r4lazy_$r mma2 uniform verify_bench_r4lazy
  MLAV_MMA2_RING=4 run_bench r4fma_$r mma2 uniform verify_bench_r4fma
  MLAV_MMA2_RING=4 run_bench r4fmaskip_$r mma2 uniform verify_bench_r4fmaskip
  MLAV_MMA2_RING=ws run_bench old_ws_$r mma2 uniform verify_bench_old
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsskip_$r mma2 uniform verify_bench_wsskip
  MLAV_MMA2_RING=ws run_bench wslazy_$r mma2 uniform verify_bench_wslazy
done
t bench
MLAV_MMA2_RING=4 run_tests mma2
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests
run_tests mma6
run_tests wgmma
MLAV_MMA2_RING=4 run_tests mma2 cuda_tests_r4lazy
MLAV_MMA2_RING=4 run_tests mma2 cuda_tests_r4fma
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wslazy
t tests
seed=$(( $(date +%s) % 1000000007 ))
MLAV_CUDA_KERNEL=mma2 RC_PARAMS="seed=$seed" timeout 100 $B/props_tests \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_mma2.log 2>&1
echo "props mma2 seed $seed rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_mma2.log | head -3 | tr '\n' ' ')"
t props
f='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for tool in memcheck racecheck; do
  MLAV_CUDA_KERNEL=mma2 timeout 110 compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/cuda_tests --gtest_filter="$f" > $O/san_${tool}_mma2.log 2>&1
  echo "$tool mma2 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_${tool}_mma2.log | head -3 | tr '\n' ' ')"
done
for v in arrive sync sync_partial; do
  timeout 30 compute-sanitizer --tool racecheck $B/racecheck_probe --variant $v > $O/probe_$v.log 2>&1
  echo "probe $v rc=$?: $(grep -E 'racecheck_probe|RACECHECK SUMMARY' $O/probe_$v.log | tr '\n' ' ')"
done
t sanitizers
if [ $(( $(date +%s) - T0 )) -lt 360 ]; then
  run_peer 200
  t peer
else
  echo "peer skipped (time)"
fi
finish

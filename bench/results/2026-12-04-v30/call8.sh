#!/bin/bash
# v30 call 8, final: the default build at e4664bf (MLAV_WS_KERNEL off; host changes only:
# mma2_ws_compiled, the L1 refusal naming ws) on the three kernels; the ws experiment build (its
# kernel as in call 7: rings 4 + 2, hoisted Q fragments, S 128 / PV 184) under cuda_tests, the
# property suite's CUDA instances, memcheck and racecheck (the P hand-over is bar.arrive ->
# bar.sync, which racecheck does not model: the probe's two variants are printed beside it).
source scripts/device_call_lib.sh 8
for k in mma2 mma6 wgmma; do run_tests $k; done
t tests
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_ws
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 240 $B/props_tests_ws \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
echo "props_tests_ws mma2/ws rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | head -3 | tr '\n' ' ')"
t props
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for tool in memcheck racecheck; do
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 300 compute-sanitizer --tool $tool \
    --error-exitcode 9 $B/cuda_tests_ws --gtest_filter="$filter" > $O/san_${tool}_ws.log 2>&1
  echo "compute-sanitizer $tool ws rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/san_${tool}_ws.log | head -4 | tr '\n' ' ')"
  t $tool
done
for v in arrive sync; do
  compute-sanitizer --tool racecheck $B/racecheck_probe --variant $v 2>&1 |
    grep -E "racecheck_probe|RACECHECK SUMMARY" | sed "s/^/probe $v: /"
done
finish

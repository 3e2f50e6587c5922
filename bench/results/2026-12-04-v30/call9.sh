#!/bin/bash
# v30 call 9: the ws experiment at cbc337a (Q published before the first hoisted fragments, after call
# 8's property-suite failures): cuda_tests, the property suite's CUDA instances, racecheck on
# the sanitizer filter; and racecheck on a build without the hoist (MLAV_WS_HOIST=0), so the
# hazards left are those of the bar.arrive -> bar.sync hand-overs (the probe's pattern).
source scripts/device_call_lib.sh 9
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_ws
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 240 $B/props_tests_ws \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
echo "props_tests_ws mma2/ws rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | head -3 | tr '\n' ' ')"
grep -E "FAILED .* at case" $O/props_ws.log | head -3
t props
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for b in cuda_tests_ws cuda_tests_h0; do
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 compute-sanitizer --tool racecheck \
    --error-exitcode 9 $B/$b --gtest_filter="$filter" > $O/san_racecheck_$b.log 2>&1
  echo "racecheck $b rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED  \] [0-9]' $O/san_racecheck_$b.log | head -3 | tr '\n' ' ')"
  grep -A1 "Race reported" $O/san_racecheck_$b.log | grep -oE "(at|access at) [^(]*\(|verify_partial_ws.cu:[0-9]+|verify_kernel.cuh:[0-9]+|cuda_bf16.hpp:[0-9]+" | sort | uniq -c | sort -rn | head -8
  t $b
done
finish

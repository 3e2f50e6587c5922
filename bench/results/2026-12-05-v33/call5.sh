#!/bin/bash
# v33 call 5: correctness of the new ws default (MLAV_WS_ROW_EARLY=1; named-barrier hand-overs)
# at 4f3d60d: the CUDA property suite with a fresh seed (307552161, 60 cases) and compute-sanitizer
# memcheck on the sanitizer set of scripts/device_run.sh.
source scripts/device_call_lib.sh 9
MLAV_SEED=307552161 MLAV_CASES=60 MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 $B/props_tests \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
echo "props_tests mma2/ws seed 307552161 rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | head -3 | tr '\n' ' ')"
grep -E "FAILED .* at case" $O/props_ws.log | head -3
t props
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 compute-sanitizer --tool memcheck \
  --error-exitcode 9 $B/cuda_tests --gtest_filter="$filter" > $O/san_memcheck_ws.log 2>&1
echo "memcheck ws rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/san_memcheck_ws.log | head -3 | tr '\n' ' ')"
t memcheck
finish

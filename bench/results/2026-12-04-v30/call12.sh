#!/bin/bash
# v30 call 12: racecheck on the ws experiment with P over the S ring's buffers 4-5 (call 11's
# build): the new aliasing (P's bytes re-filled by cp.async after the "P empty" barrier) must
# show no cp.async hazard; the hand-overs through bar.arrive -> bar.sync are the tool's known
# blind spot (probe).
source scripts/device_call_lib.sh 12
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 280 compute-sanitizer --tool racecheck \
  --error-exitcode 9 $B/cuda_tests_ws --gtest_filter="$filter" > $O/san_racecheck_ws.log 2>&1
echo "racecheck ws rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED  \] [0-9]' $O/san_racecheck_ws.log | head -3 | tr '\n' ' ')"
grep -A1 "Race reported" $O/san_racecheck_ws.log | grep -oE "cp_async16|verify_partial_ws.cu:[0-9]+|verify_kernel.cuh:[0-9]+|cuda_bf16.hpp:[0-9]+" | sort | uniq -c | sort -rn | head -8
t racecheck
finish

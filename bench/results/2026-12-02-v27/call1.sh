#!/bin/bash
# Session 15, call 1: the default kernel after 9f20e1b (the v27 macros off): cuda_tests on the
# sm_120 configuration (mma2) and wgmma, memcheck on mma2's balanced and graph cases, and the
# benchmark's six and mixed batches on mma2 under the uniform plan.
source scripts/device_call_lib.sh 1
run_tests mma2
run_tests wgmma
t tests
MLAV_CUDA_KERNEL=mma2 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/san_memcheck.log 2>&1
echo "memcheck mma2 rc=$?: $(grep -E 'ERROR SUMMARY' $O/san_memcheck.log | head -1)"
t memcheck
run_bench mma2_uniform mma2 uniform
t bench
finish

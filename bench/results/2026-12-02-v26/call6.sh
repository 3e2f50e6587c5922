#!/bin/bash
# Session 14, call 6: one launch helper for the planning, partial and merge kernels
# (launch_kernel in verify_kernel.cuh; the kernels' code unchanged): cuda_tests on the three
# kernels, memcheck on the balanced and graph tests, the benchmark under both plans.
source scripts/device_call_lib.sh 6
for k in wgmma mma2 mma6; do run_tests $k; done
t tests
MLAV_CUDA_KERNEL=wgmma timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/memcheck_wgmma.log 2>&1
echo "memcheck wgmma rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/memcheck_wgmma.log | head -3 | tr '\n' ' ')"
t memcheck
for k in wgmma mma2; do for plan in balanced uniform; do run_bench ${k}_$plan $k $plan; done; done
t bench
finish

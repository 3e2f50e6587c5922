#!/bin/bash
# Session 17, call 5, at the session's last cuda/ change: the default build's partial kernels'
# SASS against c72e14e's (ring 2/3/4 and the 6-stage kernel: every MLAV_COPY_WARPS branch is
# compiled out), cuda_tests on the three kernels, and the racecheck-clean form of the copy
# warpgroup (MLAV_COPY_WARPS=2) rebuilt at this tree: cuda_tests and racecheck on it.
source scripts/device_call_lib.sh 5
sass_diff s2 .device/k5/prev_verify_partial_s2.cu.o .device/k5/new_verify_partial_s2.cu.o
sass_diff s6 .device/k5/prev_verify_partial_s6.cu.o .device/k5/new_verify_partial_s6.cu.o
for k in mma2 mma6 wgmma; do run_tests $k; done
run_tests mma2 cuda_tests_cwall
t tests
MLAV_CUDA_KERNEL=mma2 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/cuda_tests_cwall --gtest_filter='*balanced*:*CudaGraph*' > $O/san_racecheck_cwall.log 2>&1
echo "compute-sanitizer racecheck cwall rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $O/san_racecheck_cwall.log | head -3 | tr '\n' ' ')"
t racecheck
finish

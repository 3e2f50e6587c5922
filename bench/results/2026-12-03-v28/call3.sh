#!/bin/bash
# Session 17, call 3: call 2's racecheck hazards on the copy warpgroup (68, every one between a
# chunk's cp.async and the previous use's ldmatrix reads) against MLAV_COPY_WARPS=2, where every
# math thread arrives on "empty" itself instead of lane 0 after __syncwarp: if the tool is clean
# there, the hazards are its blindness to the warp-level handoff (as in v19), not a missing
# order in the ring. cuda_tests and racecheck on it, then two rounds of the kernel, cw and cwall.
source scripts/device_call_lib.sh 3
run_tests mma2 cuda_tests_cwall
t tests
MLAV_CUDA_KERNEL=mma2 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/cuda_tests_cwall --gtest_filter='*balanced*:*CudaGraph*' > $O/san_racecheck_cwall.log 2>&1
echo "compute-sanitizer racecheck cwall rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $O/san_racecheck_cwall.log | head -3 | tr '\n' ' ')"
t racecheck
for round in 1 2; do
  run_bench base_$round mma2 uniform
  run_bench cw_$round mma2 uniform verify_bench_cw
  run_bench cwall_$round mma2 uniform verify_bench_cwall
done
t bench
finish

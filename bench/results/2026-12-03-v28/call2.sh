#!/bin/bash
# Session 17, call 2: what the copy warpgroup's gain (call 1: 0-6%) is made of, and its
# correctness bar. Two interleaved rounds, uniform plan, mma2: the kernel, the variant at 40/232
# registers (cw) and at 24/240 (cw24, whose copy warps spill), and both without any chunk copy
# (MLAV_NO_KV_LOAD=1, timing-only: noload, cwnoload). Then the tensor-rate emulation of v20c
# (MLAV_MMA_REPEAT=2 and 3, timing-only) with and without the copy warps: does overlapping the
# copies pay more where the tensor cores are slower, as on the RTX PRO 6000? Then the property
# suite's CUDA instances on the variant, and compute-sanitizer memcheck, racecheck and synccheck
# on its balanced and graph tests.
source scripts/device_call_lib.sh 2
for round in 1 2; do
  run_bench base_$round mma2 uniform
  for v in cw cw24 noload cwnoload; do run_bench ${v}_$round mma2 uniform verify_bench_$v; done
done
for v in rep2 cwrep2 rep3 cwrep3; do run_bench $v mma2 uniform verify_bench_$v; done
t bench
MLAV_CUDA_KERNEL=mma2 timeout 240 $B/props_tests_cw --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_cw.log 2>&1
echo "props_tests_cw mma2 rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_cw.log | head -3 | tr '\n' ' ')"
t props
for tool in memcheck racecheck synccheck; do
  MLAV_CUDA_KERNEL=mma2 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/cuda_tests_cw --gtest_filter='*balanced*:*CudaGraph*' > $O/san_$tool.log 2>&1
  echo "compute-sanitizer $tool cw rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/san_$tool.log | head -3 | tr '\n' ' ')"
done
t sanitize
finish

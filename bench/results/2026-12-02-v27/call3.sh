#!/bin/bash
# Session 16, call 3: does v24's S split (32 x 32 warp tiles in S: a third fewer shared-memory
# operand reads) start to pay once the V copies are gone? The split, the split without V copies
# (MLAV_S_SPLIT=1 MLAV_NO_KV_LOAD=2) and their traces beside the kernel and NO_KV_LOAD=2, two
# rounds, mma2, uniform plan. Then the sm_120 configuration's correctness bar at this commit:
# the property suite's CUDA instances, memcheck and racecheck on the balanced and graph tests.
source scripts/device_call_lib.sh 3
for round in 1 2; do
  run_bench base_$round mma2 uniform
  run_bench novload_$round mma2 uniform verify_bench_novload
  run_bench split_$round mma2 uniform verify_bench_split
  run_bench splitnovload_$round mma2 uniform verify_bench_splitnovload
done
t bench
for v in trace0 novloadtrace splittrace splitnovloadtrace splitnoloadtrace noloadtrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"
  grep MMATRACE $O/$v.txt | head -2 | sed 's/blocks with.*cycles per tile//'
done
t traces
MLAV_CUDA_KERNEL=mma2 timeout 200 $B/props_tests --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_mma2.log 2>&1
echo "props_tests mma2 rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_mma2.log | head -3 | tr '\n' ' ') $(grep -E 'cuda' $O/props_mma2.log | grep -E 'passed|failed' | head -3 | tr '\n' ' ')"
t props
for tool in memcheck racecheck; do
  MLAV_CUDA_KERNEL=mma2 timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/san_$tool.log 2>&1
  echo "compute-sanitizer $tool mma2 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/san_$tool.log | head -3 | tr '\n' ' ')"
done
t sanitize
finish

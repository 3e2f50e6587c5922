#!/bin/bash
# v30 call 11: the ws experiment at f4c5fda: P over the S ring's buffers 4-5, the S ring 6 deep and
# the V ring 2 in the same 100,864 bytes; S warps at 136 registers (and 128, 144 as variants;
# the 4 + 2 split with its own P buffer beside them). cuda_tests, the property suite's CUDA
# instances, then ring 4 and the ws builds, two rounds under the uniform plan.
source scripts/device_call_lib.sh 11
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_ws
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 240 $B/props_tests_ws \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
echo "props_tests_ws mma2/ws rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | head -3 | tr '\n' ' ')"
grep -E "FAILED .* at case" $O/props_ws.log | head -3
t props
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_u$r mma2 uniform verify_bench_ws
  for v in ws s128 s144 s4v2; do MLAV_MMA2_RING=ws run_bench ${v}_u$r mma2 uniform verify_bench_$v; done
done
t bench
finish

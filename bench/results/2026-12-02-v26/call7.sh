#!/bin/bash
# Session 14, call 7: the property suite (props_tests: every property against the model, the CPU
# and the CUDA backend, the balanced plan drawn in about half the cases) on the wgmma kernel,
# whose balanced plan now launches its partial kernel in stream order, and on the sm_120
# configuration (mma2), 0280ca7's code; the CUDA instances only (campaign and shipped scenarios).
source scripts/device_call_lib.sh 7
for k in wgmma mma2; do
  MLAV_CUDA_KERNEL=$k timeout 200 $B/props_tests --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_$k.log 2>&1
  echo "props_tests $k rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_$k.log | head -3 | tr '\n' ' ') $(grep -E 'cuda' $O/props_$k.log | grep -E 'passed|failed' | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $O/props_$k.log | head -5
  t $k
done
finish

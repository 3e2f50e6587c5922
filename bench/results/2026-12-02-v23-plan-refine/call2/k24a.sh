#!/bin/bash
# Session 11, call 2: the refined balanced plan (split_plan.h, verify_plan.cu): cuda_tests (the
# graph test checks the device's chunk and n_i against the host function on every replay),
# racecheck and memcheck of the balanced and graph tests, the property suite on CUDA.
export LD_LIBRARY_PATH=.device/lib; O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma mma6; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 100 .device/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
  grep -E "^\[  FAILED  \] [A-Z]" $O/tests_$k.log | head -5
done
t tests
f='*balanced*:*CudaGraph*'
for k in mma2 wgmma; do for tool in racecheck memcheck; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 .device/cuda_tests --gtest_filter="$f" > $O/san_${tool}_$k.log 2>&1; rc=$?
  echo "$tool $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_${tool}_$k.log | tr '\n' ' ')"
done; done
t sanitize
for k in mma2 wgmma; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 130 .device/props_tests --gtest_filter='*cuda*' > $O/props_$k.log 2>&1; rc=$?
  echo "props cuda $k rc=$rc $(( $(date +%s) - s )) s"; grep -E 'cases in|passed|FAILED|LOST' $O/props_$k.log | head -8
done
t props
gzip -f $O/*.log; tar cf $OUT/k24a.tar -C $O .

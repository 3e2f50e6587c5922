#!/bin/bash
# Session 14, call 1: launch_partial_kernel as a template over the kernel's argument type (the
# TMA variant's launcher over it instead of a copy of its cudaLaunchConfig code); the CUDA plugin
# and the fault plugin over plugin::open_exported_device (their own table code removed):
# cuda_tests on mma2, wgmma and mma6, the TMA variant's tests (MLAV_TMA_KV=2), the CUDA plugin
# tests with both plugins; then the wgmma kernel's per-block trace (now also printing the last
# workload's launch) under the balanced and the uniform plan, for the mixed batches' fixed cost.
B=/tmp/b1; rm -rf $B; mkdir -p $B; tar xzf .device/k1/bin.tgz -C $B
O=/tmp/o1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma mma6; do
  MLAV_CUDA_KERNEL=$k timeout 90 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $O/tests_$k.log | head -5
done
MLAV_CUDA_KERNEL=mma2 timeout 90 $B/cuda_tests_tma2 > $O/tests_tma2.log 2>&1; rc=$?
echo "cuda_tests_tma2 mma2 rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_tma2.log | head -3 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $O/tests_tma2.log | head -5
t tests
export MLAV_CUDA_PLUGIN=$B/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=$B/libmlav_test_fault_cuda_plugin.so MLAV_PLUGIN_WORKER=$B/mlaverify-plugin-worker
timeout 180 $B/cuda_plugin_tests > $O/plugin_tests.log 2>&1; rc=$?
echo "cuda_plugin_tests rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/plugin_tests.log | head -3 | tr '\n' ' ') skipped: $(grep -c '^\[  SKIPPED \]' $O/plugin_tests.log)"
grep -E '^\[  FAILED  \]' $O/plugin_tests.log | head -5
t plugin
for plan in balanced uniform; do
  MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=$plan timeout 120 $B/verify_bench_trace > $O/trace_wgmma_$plan.txt 2>&1
  echo "trace wgmma $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/trace_wgmma_$plan.txt | awk '{printf "%s ", $3}')"
  grep '^TRACE' $O/trace_wgmma_$plan.txt | tail -3
  MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $O/bench_wgmma_$plan.txt 2>&1
  echo "bench wgmma $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_wgmma_$plan.txt | awk '{printf "%s ", $3}')"
done
t trace
gzip -f $O/*.log
tar czf $OUT/call1.tgz -C $O .

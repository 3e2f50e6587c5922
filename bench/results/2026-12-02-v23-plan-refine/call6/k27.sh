#!/bin/bash
# Session 11, call 6: a CUDA plugin's lost context (BackendLost in process, a fresh worker when
# guarded): the new cuda_plugin_tests and the old plugin code as their mutant; then where the
# refined plan's wgmma cost came from (v23): the planning kernel alone (--plan-cost) and the wgmma
# bench for the planner of d4f681c, with the refinement's unused shared memory, with its extra
# block-wide sum, and with the refinement itself (within the old grid).
O=/tmp/o6; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
export MLAV_CUDA_PLUGIN=.device/k27/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=.device/k27/libmlav_test_fault_cuda_plugin.so
for v in "" _mutant; do
  MLAV_PLUGIN_WORKER=.device/k27/mlaverify-plugin-worker$v timeout 60 .device/k27/cuda_plugin_tests$v --gtest_filter='*Lost*:*GuardedFault*:*Loads*' > $O/plugin_lost$v.log 2>&1
  echo "cuda_plugin_tests$v (lost) rc=$?: $(grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \] C' $O/plugin_lost$v.log | tr '\n' ' ')"
  grep -E "Failure|not BackendLost|a faulting run" -A2 $O/plugin_lost$v.log | head -8
done
MLAV_PLUGIN_WORKER=.device/k27/mlaverify-plugin-worker timeout 150 .device/k27/cuda_plugin_tests > $O/plugin_all.log 2>&1
echo "cuda_plugin_tests (all) rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/plugin_all.log | tr '\n' ' ')"
t plugin
for v in "" _plan_smem _plan_reduce _plan_refined; do
  MLAV_CUDA_KERNEL=wgmma timeout 30 .device/k27/verify_bench$v --plan-cost > $O/plancost$v.txt 2>&1
  echo "plan-cost base$v rc=$?: $(grep plan-cost $O/plancost$v.txt | awk '{printf "%s ", $3}')"
done
t plancost
for r in 1 2; do for v in "" _plan_smem _plan_reduce _plan_refined; do
  MLAV_CUDA_KERNEL=wgmma timeout 30 .device/k27/verify_bench$v > $O/bench_wgmma${v}_$r.txt 2>&1
  echo "wgmma base$v r$r rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_wgmma${v}_$r.txt | awk '{printf "%s ", $3}')"
done; done
t bench
gzip -f $O/*.log; tar czf $OUT/k27.tgz -C $O .

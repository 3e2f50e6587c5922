#!/bin/bash
# v44 call 1: one plan per forward pass (VerifyKernel::plan() once, attend() per layer).
# On an H200 (unless SKIP_TABLE=1) only the README's table as v42's call7.sh runs it (the issue's
# machine; no H200 has come since v37), from these binaries. Else: the new layered graph test and the
# lifecycle test under the wgmma kernel, the sm_120 default (ws) and ring 4, memcheck on the
# layered test; the mixed three under the balanced plan with the plan in every call
# (MLAV_BENCH_PLAN=balanced) and planned once (once: the graph holds attend() alone), alternated
# twice, for wgmma and the sm_120 default; the planning kernel alone (--plan-cost); FlashInfer
# fa3 and fa2 (228 KB) on the mixed three in the same call.
#   bash bench/results/2026-12-07-v44/build1.sh, then carry [".device/k7", ".device/k7m", ".device/mixpeer"]
if [ "${SKIP_TABLE:-0}" != 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 7#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k7.sh
  LIMIT=570 exec bash /tmp/call7_k7.sh  # the rest in a second call, SKIP_TABLE=1
fi
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer
source scripts/device_call_lib.sh 7
call_n=1
O=/tmp/o1_v44
rm -rf $O && mkdir -p $O
W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
bench_pair() {  # one round: each kernel with the plan in every call, then planned once
  run_bench wg_bal_$1 wgmma balanced
  run_bench wg_once_$1 wgmma once
  run_bench ws_bal_$1 mma2 balanced
  run_bench ws_once_$1 mma2 once
  t "round $1"
  pack
}
main() {
  local f='CudaGraph*:CudaSupport.Lifecycle*'
  run_tests wgmma cuda_tests "$f"
  mv $O/tests_wgmma.log $O/tests_wgmma_graph.log
  run_tests mma2 cuda_tests "$f"
  mv $O/tests_mma2.log $O/tests_mma2_default_graph.log
  MLAV_MMA2_RING=4 run_tests mma2 cuda_tests "$f"
  for k in wgmma mma2; do
    MLAV_CUDA_KERNEL=$k timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
      $B/cuda_tests --gtest_filter='CudaGraphLayers.*' > $O/memcheck_layers_$k.log 2>&1
    echo "memcheck layers $k rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck_layers_$k.log | tr '\n' ' ')"
  done
  # The mutants the layered test is to kill (call1.sh's build: mutants.sh): m1, a plan() that
  # enqueues nothing; m2, an attend() that drops the plan (the uniform grid).
  mkdir -p /tmp/m && tar xzf .device/k7m/bin.tgz -C /tmp/m
  for m in m1 m2; do
    timeout 60 /tmp/m/cuda_tests_$m --gtest_filter='CudaGraphLayers.*' > $O/mutant_$m.log 2>&1
    echo "mutant $m rc=$? (nonzero: killed): $(grep -E '^\[  (PASSED|FAILED) ' $O/mutant_$m.log | tr '\n' ' ')"
    grep -m2 -E 'Failure|error|Expected' $O/mutant_$m.log
  done
  t tests
  pack
  bench_pair 1
  peer fa3
  pack
  bench_pair 2
  MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=balanced timeout 60 $B/verify_bench --plan-cost > $O/plan_cost_wgmma.txt 2>&1
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=balanced timeout 60 $B/verify_bench --plan-cost > $O/plan_cost_mma2.txt 2>&1
  grep plan-cost $O/plan_cost_wgmma.txt | tail -3
  grep plan-cost $O/plan_cost_mma2.txt | tail -3
  t plan_cost
  pack
  peer fa2
}
main 2>&1 | tee "$O/summary.txt"
finish

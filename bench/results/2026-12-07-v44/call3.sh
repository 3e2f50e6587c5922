#!/bin/bash
# v44 call 3. On an H200: the README's table first (v42's call7.sh from .device/k7, LIMIT 420),
# the machine. On any card: the wgmma kernel's per-block trace (MLAV_WGMMA_TRACE build,
# .device/k7t) of the nine under the plan per call and planned once (mix-p0-p1-p4097's 28.2 us
# against fa3's 25: where the partial kernel's span ends and what lies outside it), and racecheck
# of the layered graph test under the sm_120 default.
#   bash bench/results/2026-12-07-v44/build3.sh, then carry [".device/k7", ".device/k7t", ".device/mixpeer"]
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 7#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k7.sh
  LIMIT=420 bash /tmp/call7_k7.sh
fi
source scripts/device_call_lib.sh 7
call_n=3
O=/tmp/o3_v44
rm -rf $O && mkdir -p $O
tar xzf .device/k7t/bin.tgz -C $B
main() {
  for plan in balanced once; do
    MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=$plan timeout 120 $B/verify_bench_trace > $O/trace_wgmma_$plan.txt 2>&1
    echo "trace wgmma $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/trace_wgmma_$plan.txt | awk '{printf "%s ", $3}')"
    python3 scripts/trace_summary.py $O/trace_wgmma_$plan.txt > $O/trace_summary_$plan.txt 2>&1
    tail -4 $O/trace_summary_$plan.txt  # the last launch traced: mix-p0-p1-p4097's
  done
  t trace
  pack
  MLAV_CUDA_KERNEL=mma2 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
    $B/cuda_tests --gtest_filter='CudaGraphLayers.*' > $O/racecheck_layers_mma2.log 2>&1
  echo "racecheck layers mma2 rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/racecheck_layers_mma2.log | tr '\n' ' ')"
  t racecheck
}
main 2>&1 | tee "$O/summary.txt"
finish

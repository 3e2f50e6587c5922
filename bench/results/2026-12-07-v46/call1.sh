#!/bin/bash
# v46 call 1. On an H200 (unless SKIP_TABLE=1) only the README's table (v42's call7.sh from
# this build), the machine; the rest then in a second call with SKIP_TABLE=1. Else:
# - the new default (wgmma: tile 1's gather once Q has landed, v45's late1; its PTX is late1's
#   line for line): cuda_tests under wgmma and the sm_120 default, memcheck and racecheck of the
#   wgmma kernel on the small cases;
# - the merge kernel's variants: MLAV_MERGE_FRONT (merge_row visits only the written partials)
#   and MLAV_MERGE_COLS (v45's row quarters, which call 4 found 10-50 us slower where the plan's
#   cap is far above the splits used, because it loaded a partial for every one of the cap + 1;
#   now it too visits only the written ones): cuda_tests under wgmma and mma2, memcheck under mma2;
# - two alternated rounds: the new and the old default under wgmma planned once and uniform;
#   front and cols2 under wgmma planned once and the sm_120 default (ws) planned once and
#   uniform (ws ends every call in the merge kernel).
#   bash bench/results/2026-12-07-v46/build1.sh, then carry [".device/k10", ".device/mixpeer"]
if [ "${SKIP_TABLE:-0}" != 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 10#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k10.sh
  LIMIT=570 exec bash /tmp/call7_k10.sh
fi
source scripts/device_call_lib.sh 10
call_n=1
O=/tmp/o1_v46
rm -rf $O && mkdir -p $O
san() {  # san TOOL KERNEL BIN
  local log=$O/$1_$2_$3.log
  MLAV_CUDA_KERNEL=$2 timeout 120 compute-sanitizer --tool $1 --error-exitcode 9 \
    $B/$3 --gtest_filter="$SAN_FILTER" > $log 2>&1
  echo "$1 $2 $3 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $log | tr '\n' ' ')"
}
main() {
  run_tests wgmma
  run_tests mma2
  run_tests wgmma cuda_tests_front
  run_tests mma2 cuda_tests_front
  run_tests wgmma cuda_tests_cols2
  run_tests mma2 cuda_tests_cols2
  t tests
  pack
  san memcheck wgmma cuda_tests
  san racecheck wgmma cuda_tests
  san memcheck mma2 cuda_tests_front
  san memcheck mma2 cuda_tests_cols2
  t sanitizers
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench old_wg_once_$r wgmma once verify_bench_old
    run_bench front_wg_once_$r wgmma once verify_bench_front
    run_bench cols2_wg_once_$r wgmma once verify_bench_cols2
    run_bench ws_once_$r mma2 once
    run_bench front_ws_once_$r mma2 once verify_bench_front
    run_bench cols2_ws_once_$r mma2 once verify_bench_cols2
    run_bench ws_uni_$r mma2 uniform
    run_bench front_ws_uni_$r mma2 uniform verify_bench_front
    run_bench cols2_ws_uni_$r mma2 uniform verify_bench_cols2
    run_bench wg_uni_$r wgmma uniform
    run_bench old_wg_uni_$r wgmma uniform verify_bench_old
    t "round $r"
    pack
  done
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v46 call 2: the merge kernel's MLAV_MERGE_PASSES variant. Call 1 found mergecols (a warp per
# row quarter, 8 partials in flight) 7-9% faster on long-ctx and 3-7% on mix-p0-p1-p4097, where
# rows hold 16-22 splits, but slower where they hold 1-4 (4x the warps); passes keeps one warp per
# row and takes its quarters in turn. Its cuda_tests under wgmma and mma2 and memcheck under mma2;
# two alternated rounds of the kernel, passes and front under wgmma planned once and the sm_120
# default (ws) planned once.
#   bash bench/results/2026-12-07-v46/build2.sh, then carry [".device/k11"]
source scripts/device_call_lib.sh 11
call_n=2
O=/tmp/o2_v46
rm -rf $O && mkdir -p $O
main() {
  run_tests wgmma cuda_tests_passes
  run_tests mma2 cuda_tests_passes
  MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/cuda_tests_passes --gtest_filter="$SAN_FILTER" > $O/memcheck_passes_mma2.log 2>&1
  echo "memcheck passes mma2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck_passes_mma2.log | tr '\n' ' ')"
  t tests
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench passes_wg_once_$r wgmma once verify_bench_passes
    run_bench front_wg_once_$r wgmma once verify_bench_front
    run_bench ws_once_$r mma2 once
    run_bench passes_ws_once_$r mma2 once verify_bench_passes
    run_bench front_ws_once_$r mma2 once verify_bench_front
    t "round $r"
    pack
  done
}
main 2>&1 | tee "$O/summary.txt"
finish

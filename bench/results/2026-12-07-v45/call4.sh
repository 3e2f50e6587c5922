#!/bin/bash
# v45 call 4: the merge kernel's column-quarter variant (MLAV_MERGE_COLS). Call 1 put 7-11 us of
# mix-p0-p1-p4097's call (wgmma, planned once) outside the partial kernel's span, where the merge
# kernel runs: 256 rows of 24 partials each, one warp per row merging one partial at a time (its
# loads behind a branch on the partial's lse). Interleaving the rows over the blocks (mergeil)
# gained 0.1-0.9 us. Here: the variant's cuda_tests under wgmma and the sm_120 default, memcheck
# on its small cases, and two alternated rounds of the kernel and the variant under wgmma planned
# once, the sm_120 default (ws) planned once and under the uniform plan (every ws call ends in the
# merge kernel); FlashInfer fa2 (228 KB) on the mixed three after.
#   bash bench/results/2026-12-07-v45/build4.sh, then carry [".device/k9", ".device/mixpeer"]
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer
source scripts/device_call_lib.sh 9
call_n=4
O=/tmp/o4_v45
rm -rf $O && mkdir -p $O
main() {
  run_tests wgmma cuda_tests_mergecols
  run_tests mma2 cuda_tests_mergecols
  MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/cuda_tests_mergecols --gtest_filter="$SAN_FILTER" > $O/memcheck_mergecols_mma2.log 2>&1
  echo "memcheck mergecols mma2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck_mergecols_mma2.log | tr '\n' ' ')"
  t tests
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench cols_wg_once_$r wgmma once verify_bench_mergecols
    run_bench ws_once_$r mma2 once
    run_bench cols_ws_once_$r mma2 once verify_bench_mergecols
    run_bench ws_uni_$r mma2 uniform
    run_bench cols_ws_uni_$r mma2 uniform verify_bench_mergecols
    run_bench wg_uni_$r wgmma uniform
    run_bench cols_wg_uni_$r wgmma uniform verify_bench_mergecols
  done
  t bench
  pack
  W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097 peer fa2
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v45 call 4: the merge kernel's column-quarter variant (MLAV_MERGE_COLS). Call 1 put 7-11 us of
# mix-p0-p1-p4097's call (wgmma, planned once) outside the partial kernel's span, where the merge
# kernel runs: 256 rows of 24 partials each, one warp per row merging one partial at a time (its
# loads behind a branch on the partial's lse). Interleaving the rows over the blocks (mergeil)
# gained 0.1-0.9 us. Here: two alternated rounds of the kernel and the variant under wgmma planned
# once, the sm_120 default (ws) planned once and under the uniform plan (every ws call ends in the
# merge kernel). Ordered for the session's last ~200 s of device time: the variant's cuda_tests under
# the sm_120 default, the rounds, then its cuda_tests under wgmma and memcheck.
#   bash bench/results/2026-12-07-v45/build4.sh, then carry [".device/k9"]
source scripts/device_call_lib.sh 9
call_n=4
O=/tmp/o4_v45
rm -rf $O && mkdir -p $O
main() {  # ordered for a short budget: each step packed as it ends
  run_tests mma2 cuda_tests_mergecols
  t tests_mma2
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench cols_wg_once_$r wgmma once verify_bench_mergecols
    run_bench ws_once_$r mma2 once
    run_bench cols_ws_once_$r mma2 once verify_bench_mergecols
    run_bench ws_uni_$r mma2 uniform
    run_bench cols_ws_uni_$r mma2 uniform verify_bench_mergecols
    t "round $r"
    pack
  done
  run_tests wgmma cuda_tests_mergecols
  pack
  MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/cuda_tests_mergecols --gtest_filter="$SAN_FILTER" > $O/memcheck_mergecols_mma2.log 2>&1
  echo "memcheck mergecols mma2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck_mergecols_mma2.log | tr '\n' ' ')"
  t memcheck
}
main 2>&1 | tee "$O/summary.txt"
finish

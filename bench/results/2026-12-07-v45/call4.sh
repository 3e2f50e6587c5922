#!/bin/bash
# v45 call 4 (staged; the session's device time ran out on failed starts). On an H200 (unless
# SKIP_TABLE=1) only the README's table (v42's call7.sh from these binaries), the issue's machine;
# the rest then in a second call with SKIP_TABLE=1. Else:
# - the merge kernel's column-quarter variant (MLAV_MERGE_COLS). Call 1 put 7-11 us of
#   mix-p0-p1-p4097's call (wgmma, planned once) outside the partial kernel's span, where the merge
#   kernel runs: 256 rows of 22 partials each, one warp per row merging one partial at a time (its
#   loads behind a branch on the partial's lse). Interleaving the rows over the blocks (mergeil)
#   gained 0.1-0.9 us. The variant's cuda_tests under wgmma and the sm_120 default and memcheck
#   on its small cases; late1's cuda_tests (not run in call 1);
# - two alternated rounds: the kernel and mergecols under wgmma planned once, the sm_120 default
#   (ws) planned once and under the uniform plan (every ws call ends in the merge kernel); late1
#   under wgmma, uniform and once (its third and fourth rounds after call 1's ~1%);
# - FlashInfer fa3 and fa2 (228 KB) on the mixed three in the same call.
#   bash bench/results/2026-12-07-v45/build4.sh, then carry [".device/k9", ".device/mixpeer"]
if [ "${SKIP_TABLE:-0}" != 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 9#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k9.sh
  LIMIT=570 exec bash /tmp/call7_k9.sh
fi
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer
source scripts/device_call_lib.sh 9
call_n=4
O=/tmp/o4_v45
rm -rf $O && mkdir -p $O
main() {  # each step packed as it ends
  run_tests mma2 cuda_tests_mergecols
  run_tests wgmma cuda_tests_mergecols
  run_tests wgmma cuda_tests_late1
  MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/cuda_tests_mergecols --gtest_filter="$SAN_FILTER" > $O/memcheck_mergecols_mma2.log 2>&1
  echo "memcheck mergecols mma2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $O/memcheck_mergecols_mma2.log | tr '\n' ' ')"
  t tests
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench cols_wg_once_$r wgmma once verify_bench_mergecols
    run_bench late1_once_$r wgmma once verify_bench_late1
    run_bench ws_once_$r mma2 once
    run_bench cols_ws_once_$r mma2 once verify_bench_mergecols
    run_bench ws_uni_$r mma2 uniform
    run_bench cols_ws_uni_$r mma2 uniform verify_bench_mergecols
    run_bench wg_uni_$r wgmma uniform
    run_bench late1_uni_$r wgmma uniform verify_bench_late1
    t "round $r"
    pack
  done
  W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097 peer fa3
  pack
  W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097 peer fa2
}
main 2>&1 | tee "$O/summary.txt"
finish

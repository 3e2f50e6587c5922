#!/bin/bash
# v45 call 1. On an H200 (unless SKIP_TABLE=1) only the README's table (v42's call7.sh from these
# binaries), the machine; the rest then in a second call. Else:
# - cuda_tests under the wgmma kernel and the sm_120 default (0251880's graph-test refactor had
#   run on no GPU), the property suite on the CUDA backend under the sm_120 default (ws) with a
#   fresh seed (v44's staged call4.sh), and the wgmma object's SASS against 0251880's (the trace
#   points and the variant's #ifdef must leave the kernel as it was);
# - where the wgmma kernel's ~5.5-8 us prologue goes: the trace build with the prologue split
#   (work known, Q in shared memory, Q in registers, tile 0 landed) under the uniform plan and
#   planned once, with the epilogue split too (last PV retired, partial stores issued); the same
#   for two timing variants: late1 (tile 1's gather issued once Q has landed) and staged (the
#   merge path's partial through the stash, stored row by row, 512 contiguous bytes per store
#   instruction), with staged's cuda_tests; the kernel, late1 and staged timed untraced,
#   alternated twice, beside FlashInfer fa3 on the mixed three;
# - the merge kernel with its rows interleaved over the blocks (mergeil: mix-p0-p1-p4097's 256
#   rows of 22 partials each sit in 32 blocks today), under wgmma planned once and the sm_120
#   default (ws), whose every call ends in the merge kernel, beside the kernel as it is.
#   bash bench/results/2026-12-07-v45/build1.sh, then carry [".device/k8", ".device/mixpeer"]
if [ "${SKIP_TABLE:-0}" != 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 8#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k8.sh
  LIMIT=570 exec bash /tmp/call7_k8.sh  # the rest in a second call, SKIP_TABLE=1
fi
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer, W
source scripts/device_call_lib.sh 8
call_n=1
O=/tmp/o1_v45
rm -rf $O && mkdir -p $O
trace() {  # trace BIN PLAN
  MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=$2 timeout 120 $B/$1 > $O/$1_$2.txt 2>&1
  echo "$1 $2 rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$1_$2.txt | awk '{printf "%s ", $3}')"
  python3 scripts/trace_summary.py $O/$1_$2.txt > $O/summary_$1_$2.txt 2>&1
  grep -E 'from its start|epilogue:' $O/summary_$1_$2.txt | tail -4
}
main() {
  run_tests wgmma
  run_tests mma2
  run_tests wgmma cuda_tests_staged
  run_tests wgmma cuda_tests_mergeil
  run_tests mma2 cuda_tests_mergeil
  sass_diff wgmma_obj $B/wg_before.o $B/wg_after.o
  t tests
  pack
  for b in verify_bench_trace verify_bench_tracelate1 verify_bench_tracestaged; do
    trace $b uniform
    trace $b once
  done
  t traces
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench late1_once_$r wgmma once verify_bench_late1
    run_bench staged_once_$r wgmma once verify_bench_staged
    run_bench mergeil_wg_once_$r wgmma once verify_bench_mergeil
    run_bench ws_once_$r mma2 once
    run_bench mergeil_ws_once_$r mma2 once verify_bench_mergeil
    run_bench wg_uni_$r wgmma uniform
    run_bench late1_uni_$r wgmma uniform verify_bench_late1
    run_bench ws_uni_$r mma2 uniform
    run_bench mergeil_ws_uni_$r mma2 uniform verify_bench_mergeil
  done
  t bench
  pack
  W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097 peer fa3
  pack
  run_props mma2 90
  t props
}
main 2>&1 | tee "$O/summary.txt"
finish

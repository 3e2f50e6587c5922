#!/bin/bash
# v47 call 1 (staged: the device was not lent again after the session's failed starts). On an
# H200 (unless SKIP_TABLE=1) only the README's table from the committed default (k12), the
# issue's machine. Else:
# - the merge kernel with 4 warps per row where one wave holds them (merge_parts.diff,
#   choose_merge_parts; k13):
#   cuda_tests under wgmma and the sm_120 default, by its rule and with MLAV_MERGE_PARTS=4 forced
#   on every test (the quarter form on every shape the suite has);
# - two alternated rounds of the nine planned once, k13 against the committed default (k12,
#   which no GPU has run yet: v46's adoptions ran only as variants) under wgmma and the sm_120
#   default (ws);
# - in the same rounds, bf16 partials (k14, timing only: what the partials' bytes cost) under
#   both kernels;
# - memcheck and racecheck of the wgmma kernel, memcheck of the sm_120 default with the quarters
#   forced (k13) and of bf16 partials under wgmma (k14: its error summary, not its tests, which
#   compare against fp32 numerics); the property suite on the CUDA backend under the sm_120
#   default (k13).
#   bash bench/results/2026-12-08-v47/build1.sh, then carry [".device/k12", ".device/k13",
#   ".device/k14"]
source scripts/h200_table_call.sh 12
source scripts/device_call_lib.sh 13
call_n=1
O=/tmp/o1_v47
rm -rf $O && mkdir -p $O
mkdir -p /tmp/k12 && tar xzf .device/k12/bin.tgz -C /tmp/k12
for b in verify_bench; do cp /tmp/k12/$b $B/${b}_old; done
mkdir -p /tmp/k14 && tar xzf .device/k14/bin.tgz -C /tmp/k14
cp /tmp/k14/verify_bench $B/verify_bench_bf16
cp /tmp/k14/cuda_tests $B/cuda_tests_bf16
ln -sf $B/cuda_tests $B/cuda_tests_q4  # the same binary, its own log name
main() {
  run_tests wgmma
  run_tests mma2
  MLAV_MERGE_PARTS=4 run_tests wgmma cuda_tests_q4
  MLAV_MERGE_PARTS=4 run_tests mma2 cuda_tests_q4
  t tests
  pack
  for r in 1 2; do
    run_bench wg_once_$r wgmma once
    run_bench old_wg_once_$r wgmma once verify_bench_old
    run_bench ws_once_$r mma2 once
    run_bench old_ws_once_$r mma2 once verify_bench_old
    run_bench bf16_wg_once_$r wgmma once verify_bench_bf16
    run_bench bf16_ws_once_$r mma2 once verify_bench_bf16
    t "round $r"
    pack
  done
  MLAV_MERGE_PARTS=4 K=mma2 run_san memcheck q4_mma2 cuda_tests
  K=wgmma run_san memcheck wgmma cuda_tests
  K=wgmma run_san racecheck wgmma cuda_tests
  K=wgmma run_san memcheck bf16_wgmma cuda_tests_bf16
  t sanitizers
  pack
  run_props mma2 140
  t props
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v38 call 16, the README table's first half: this commit's cuda_tests on ring 4 (the sm_120
# configuration) and the wgmma kernel; memcheck on ring 4 (this commit changed only host code:
# the ring worked out once); then one round of ring 4, the ws experiment, mma6 and wgmma (uniform
# plan for the six, balanced for the mixed three), FlashInfer fa2 (228 KB shape; PyTorch and the
# ceilings in its first step) and fa3 on the nine, the same call. Trimmed to one call's 600 s:
# this session's first five machine starts failed.
#   bash bench/results/2026-12-06-v38/build16.sh, then carry [".device/k16", ".device/mixpeer"]
source scripts/device_call_lib.sh 16
W=k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx
W=$W,mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
# Our kernels, one round: r = 1 here, 2 in call 17.
bench_round() {
  local r=$1
  MLAV_MMA2_RING=4 run_bench r4_uni_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench r4_bal_$r mma2 balanced
  MLAV_MMA2_RING=ws run_bench ws_uni_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_bal_$r mma2 balanced
  run_bench mma6_uni_$r mma6 uniform
  run_bench wg_uni_$r wgmma uniform
  run_bench wg_bal_$r wgmma balanced
  t "round $r"
}
peer() {  # peer FI_BACKEND: FlashInfer on the nine (PyTorch and the ceilings in a first step)
  (cd .device/mixpeer && env OUT="$O/peer_$1" SKIP_SELFTEST=1 FI_BACKEND=$1 ${2:-} timeout 230 \
    bash run.sh --workloads $W) > "$O/peer_$1_run.txt" 2>&1
  echo "peer $1 rc=$?"
  grep -E '^\| (k2|v3|long|mix)' "$O/peer_$1/peer_log.txt" | tail -9
  t "$1"
}
# The three FlashInfer peers on the nine, as the README's table wants them (v39 call 2, v42 call 7;
# added after this call ran, which did not use it): fa2 in its 228 KB shape, fa2 in the sm_120
# shape, then fa3 while 235 s of the call's limit (LIMIT, seconds) are left; packed after each.
peer_all() {
  peer fa2
  pack
  run_peer_sm120 $W
  t fa2_sm120
  pack
  if [ $(( $(date +%s) - T0 + 235 )) -lt ${LIMIT:-575} ]; then peer fa3; else echo 'fa3 skipped: time'; fi
}
main() {
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  MLAV_MMA2_RING=4 run_tests mma2
  run_tests wgmma
  for tool in memcheck; do
    MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=4 timeout 100 compute-sanitizer --tool $tool \
      --error-exitcode 9 $B/cuda_tests --gtest_filter="$filter" > $O/$tool.log 2>&1
    echo "$tool r4 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/$tool.log | tr '\n' ' ')"
  done
  t tests
  pack
  bench_round 1
  pack
  peer fa2
  pack
  # fa3 only while 235 s of the call's limit (LIMIT, seconds) are left (call 14's took 210 s).
  if [ $(( $(date +%s) - T0 + 235 )) -lt ${LIMIT:-575} ]; then peer fa3; else echo 'fa3 skipped: time'; fi
}
[ "${CALL16_LIB:-0}" = 1 ] || { main 2>&1 | tee "$O/summary.txt"; finish; }

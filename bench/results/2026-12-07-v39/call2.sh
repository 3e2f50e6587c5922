#!/bin/bash
# v39 call 2: the ws forms under v20c's emulation of the card's tensor rate (K = 2, timing only):
# ring 4, the named-barrier form, mbarriers with per-thread arrivals (v38: 1-9% slower than the
# named form) and with one arrival per warp; then the same three ws forms with the per-block
# trace (cycles per tile the S warps wait for "P empty" and the P.V warps for "P full"). On an
# H200 (the machine) then the README's table: one round of ring 4, ws (routed), mma6 and wgmma
# (uniform and balanced plans), FlashInfer fa2 (228 KB shape, its first step PyTorch and the
# ceilings), fa3 and fa2 in the sm_120 shape on the nine, the same call.
#   bash bench/results/2026-12-07-v39/build1.sh, then carry [".device/k2", ".device/mixpeer"]
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh
O=/tmp/o2
call_n=2
rm -rf $O $B && mkdir -p $O $B
tar xzf .device/k2/bin.tgz -C $B
main() {
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=4 run_bench r4_K2 mma2 uniform verify_bench_r4_2
  MLAV_MMA2_RING=ws run_bench wsB_K2 mma2 uniform verify_bench_wsB2
  MLAV_MMA2_RING=ws run_bench wsM_K2 mma2 uniform verify_bench_wsM2
  MLAV_MMA2_RING=ws run_bench wsE_K2 mma2 uniform verify_bench_wsE2
  t K2
  pack
  for v in wsTB2 wsTM2 wsTE2; do
    MLAV_MMA2_RING=ws MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v \
      > $O/$v.txt 2>&1
    echo "$v rc=$?"
    grep WSTRACE $O/$v.txt | head -6
  done
  t trace
  pack
  unset MLAV_WS_ROUTE
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    MLAV_MMA2_RING=4 run_bench r4_uni_1 mma2 uniform
    MLAV_MMA2_RING=4 run_bench r4_bal_1 mma2 balanced
    MLAV_MMA2_RING=ws run_bench ws_uni_1 mma2 uniform
    MLAV_MMA2_RING=ws run_bench ws_bal_1 mma2 balanced
    run_bench mma6_uni_1 mma6 uniform
    run_bench wg_uni_1 wgmma uniform
    run_bench wg_bal_1 wgmma balanced
    t round
    pack
    peer fa2
    pack
    PEER=.device/mixpeer OUT=$O/peer_sm120 PEER_MAIN=0 timeout 150 scripts/peer_fa2_sm120.sh \
      --workloads $W > $O/peer_sm120_run.txt 2>&1
    echo "fa2 sm120 shape rc=$? (1: its skipped PyTorch step)"
    grep -E '^\| (k2|v3|long|mix)' $O/peer_sm120/peer_log.txt | tail -9
    t fa2_sm120
    pack
    if [ $(( $(date +%s) - T0 + 235 )) -lt ${LIMIT:-575} ]; then peer fa3; else echo 'fa3 skipped: time'; fi
  else
    echo "not an H200: the README table's rerun skipped"
  fi
}
main 2>&1 | tee "$O/summary.txt"
finish

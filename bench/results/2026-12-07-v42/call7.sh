#!/bin/bash
# v42 call 7: the sm_120 kernel's new default (ws where its image runs) on the device, and the
# README's table from one call. cuda_tests under the default ring and under ring 4; one round of
# the default (no MLAV_MMA2_RING: ws, routed), ring 4, mma6 and wgmma (uniform plan for the six,
# balanced for the mixed three); FlashInfer fa2 (228 KB shape; PyTorch and the ceilings in its
# first step), fa2 in the sm_120 shape and fa3 on the nine, as the limit (LIMIT) allows; then
# scripts/readme_table.py over this call's folder prints the table.
#   bash bench/results/2026-12-07-v42/build7.sh, then carry [".device/k6", ".device/mixpeer"]
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer, peer_all, W
source scripts/device_call_lib.sh 6
O=/tmp/o7
call_n=7
rm -rf $O && mkdir -p $O
main() {
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 ||
    echo "not an H200: the issue's table is for the H200"
  run_tests mma2
  mv $O/tests_mma2.log $O/tests_mma2_default.log
  MLAV_MMA2_RING=4 run_tests mma2
  t tests
  run_bench ws_uni_1 mma2 uniform
  run_bench ws_bal_1 mma2 balanced
  echo "default ring: $(grep -m1 -oE 'mma\.sync x2/[a-z0-9]+' $O/bench_ws_uni_1.txt)" \
    "$(grep -c 'mma.sync x2/ws' $O/bench_ws_uni_1.txt) of 9 rows ws (chain4 routes to ring 4)"
  MLAV_MMA2_RING=4 run_bench r4_uni_1 mma2 uniform
  MLAV_MMA2_RING=4 run_bench r4_bal_1 mma2 balanced
  run_bench mma6_uni_1 mma6 uniform
  run_bench wg_uni_1 wgmma uniform
  run_bench wg_bal_1 wgmma balanced
  t round
  pack
  peer_all
}
main 2>&1 | tee "$O/summary.txt"
finish

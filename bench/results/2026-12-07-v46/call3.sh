#!/bin/bash
# v46 call 3 (staged for the next session). On an H200 (unless SKIP_TABLE=1) only the README's
# table (v42's call7.sh from this build), the issue's machine. Else the committed default's own
# run, which v46 could not pay for: cuda_tests under wgmma and the sm_120 default; the property
# suite on the CUDA backend under both with fresh seeds; memcheck and racecheck of the wgmma
# kernel and memcheck of the sm_120 default on the small cases; one round of the nine under
# wgmma (once, uniform) and the sm_120 default (once, uniform); FlashInfer fa3 and fa2 on the
# mixed three.
#   bash bench/results/2026-12-07-v46/build3.sh, then carry [".device/k12", ".device/mixpeer"]
source scripts/h200_table_call.sh 12
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh 2>/dev/null  # peer
source scripts/device_call_lib.sh 12
call_n=3
O=/tmp/o3_v46
rm -rf $O && mkdir -p $O
main() {
  run_tests wgmma
  run_tests mma2
  t tests
  run_props wgmma 100
  run_props mma2 100
  t props
  pack
  K=wgmma run_san memcheck wgmma cuda_tests
  K=wgmma run_san racecheck wgmma cuda_tests
  run_san memcheck mma2 cuda_tests
  t sanitizers
  pack
  run_bench wg_once wgmma once
  run_bench wg_uni wgmma uniform
  run_bench ws_once mma2 once
  run_bench ws_uni mma2 uniform
  t round
  pack
  run_peers_mixed fa3 fa2
}
main 2>&1 | tee "$O/summary.txt"
finish

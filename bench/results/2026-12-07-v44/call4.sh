#!/bin/bash
# v44 call 4, the session's last device time. On an H200: the README's table (v42's call7.sh from
# .device/k7; LIMIT as the budget allows, packed after each step). On any other card: the property
# suite on the CUDA backend under the sm_120 default (ws, routed) with a fresh seed, after run()
# became plan() then attend() (call 2 ran it under wgmma).
#   bash bench/results/2026-12-07-v44/build1.sh, then carry [".device/k7", ".device/mixpeer"]
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e 's#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh 7#' \
    bench/results/2026-12-07-v42/call7.sh > /tmp/call7_k7.sh
  LIMIT=${LIMIT:-140} exec bash /tmp/call7_k7.sh
fi
source scripts/device_call_lib.sh 7
call_n=4
O=/tmp/o4_v44
rm -rf $O && mkdir -p $O
main() {
  run_props mma2 120
  t props
}
main 2>&1 | tee "$O/summary.txt"
finish

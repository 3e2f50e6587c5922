#!/bin/bash
# v43 call 1: the README's table on the issue's machine when the device is an H200 (v42's
# call7.sh as it stands, binaries of 0d184ee: build7.sh packs them into .device/k6); on any
# other card only the checks of 0d184ee's host change (the plan sized for the fewer blocks of
# ws and ring 4): cuda_tests under the default ring and with the route off, and one balanced
# round of the default, so the session's device time is kept for an H200.
#   bash bench/results/2026-12-07-v42/build7.sh, then carry [".device/k6", ".device/mixpeer"]
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=${LIMIT:-560} exec bash bench/results/2026-12-07-v42/call7.sh
fi
source scripts/device_call_lib.sh 6
call_n=1
main() {
  echo "not an H200: the checks of 0d184ee only"
  run_tests mma2
  mv $O/tests_mma2.log $O/tests_mma2_default.log
  MLAV_WS_ROUTE=0 run_tests mma2
  run_bench ws_bal_1 mma2 balanced
  grep -m1 'split plan for' $O/bench_ws_bal_1.txt
  t done
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v45 call 2 (the machine of call 1, warm; same binaries). On an H200 whose call 1 ran the README's
# table: call 1's measurements (SKIP_TABLE=1). Else: compute-sanitizer memcheck over the small
# CUDA cases (SAN_FILTER) on the two variants that change what the kernels do, not only when:
# the staged store under wgmma (cuda_tests_staged) and the interleaved merge under wgmma and the
# sm_120 default (cuda_tests_mergeil); racecheck on the staged store (its stash is shared memory
# written by both warpgroups and read across them behind one barrier).
#   carry [".device/k8", ".device/mixpeer"] as call 1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "${TABLE_RAN:-0}" = 1 ]; then
  SKIP_TABLE=1 exec bash bench/results/2026-12-07-v45/call1.sh
fi
source scripts/device_call_lib.sh 8
call_n=2
O=/tmp/o2_v45
rm -rf $O && mkdir -p $O
san() {  # san TOOL KERNEL BIN
  local log=$O/$1_$2_$3.log
  MLAV_CUDA_KERNEL=$2 timeout 150 compute-sanitizer --tool "$1" --error-exitcode 9 "$B/$3" \
    --gtest_filter="$SAN_FILTER" > "$log" 2>&1
  echo "$1 $2 $3 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -E '^========= (Error|Race|Warning)' "$log" | sort | uniq -c | sort -rn | head -3
}
main() {
  san memcheck wgmma cuda_tests_staged
  pack
  san memcheck wgmma cuda_tests_mergeil
  san memcheck mma2 cuda_tests_mergeil
  pack
  san racecheck wgmma cuda_tests_staged
  t san
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v43 call 2: as call1.sh on an H200 (v42's call7.sh: the README's table on the issue's machine);
# on any other card, checks wider than v42's under the sm_120 kernel's default ring (binaries of
# 0d184ee): the property suite on the CUDA backend with a fresh seed, and memcheck over every
# cuda_tests case but the death test (v42 ran it over the 20 small cases).
#   bash bench/results/2026-12-07-v42/build7.sh, then
#   tar czf .device/k6/bin.tgz -C .device verify_bench cuda_tests props_tests
#   and carry [".device/k6", ".device/mixpeer"]
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=${LIMIT:-560} exec bash bench/results/2026-12-07-v42/call7.sh
fi
source scripts/device_call_lib.sh 6
call_n=2
main() {
  echo "not an H200: wider checks of the default ring"
  local seed=$(( $(date +%s) % 1000000007 ))
  MLAV_CUDA_KERNEL=mma2 MLAV_SEED=$seed timeout 240 "$B/props_tests" \
    --gtest_filter='Backends/PropertySuite.*/cuda' > "$O/props_default.log" 2>&1
  echo "props default ring MLAV_SEED=$seed rc=$?:" \
    "$(grep -E '^\[  (PASSED|FAILED) |cases in' "$O/props_default.log" | tr '\n' ' ')"
  t props
  pack
  MLAV_CUDA_KERNEL=mma2 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/cuda_tests" --gtest_filter='-*DeathTest*' > "$O/memcheck_all.log" 2>&1
  echo "memcheck default ring, every case but the death test, rc=$?:" \
    "$(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$O/memcheck_all.log" | tr '\n' ' ')"
  t memcheck
}
main 2>&1 | tee "$O/summary.txt"
finish

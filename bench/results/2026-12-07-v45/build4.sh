#!/bin/bash
# Builds and packs what call4.sh runs: this commit's verify_bench and cuda_tests; the merge
# kernel's column-quarter variant (MLAV_MERGE_COLS: one warp per row quarter, branch-free loads,
# 8 partials in flight) linked into verify_bench and cuda_tests; the late-tile-1 variant of the
# wgmma kernel with its cuda_tests (a third and fourth round after call 1's two; its tests never ran).
#   bash bench/results/2026-12-07-v45/build4.sh, then carry [".device/k9", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
BRIEF=1 UNIT=verify_merge LINK=tests/cuda/cuda_tests scripts/variant_bench.sh mergecols \
  cuda/verify_merge.cu -DMLAV_MERGE_COLS
SM90_ONLY=1 BRIEF=1 LINK=tests/cuda/cuda_tests scripts/variant_bench.sh late1 cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_LATE_TILE1
mkdir -p .device/k9
tar czf .device/k9/bin.tgz -C .device verify_bench cuda_tests props_tests verify_bench_mergecols \
  cuda_tests_mergecols verify_bench_late1 cuda_tests_late1
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k9/bin.tgz

#!/bin/bash
# Builds and packs what call1.sh runs: this commit's binaries (the wgmma kernel now issues tile
# 1's gather once Q has landed, v45's late1, adopted); the merge kernel's two timing variants,
# MLAV_MERGE_FRONT (merge_row visits only the written partials, not all cap + 1) and
# MLAV_MERGE_COLS (v45's warp per row quarter, now visiting only the written partials too),
# each linked into verify_bench and cuda_tests; and the previous default's verify_bench (from
# .device/k9, 03ed69a's build) as verify_bench_old, so one call times old and new side by side.
#   bash bench/results/2026-12-07-v46/build1.sh, then carry [".device/k10", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
for v in front:-DMLAV_MERGE_FRONT cols2:-DMLAV_MERGE_COLS; do
  BRIEF=1 UNIT=verify_merge LINK=tests/cuda/cuda_tests scripts/variant_bench.sh "${v%%:*}" \
    cuda/verify_merge.cu "${v#*:}"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf .device/k9/bin.tgz -C "$tmp" verify_bench
cp "$tmp/verify_bench" .device/verify_bench_old
mkdir -p .device/k10
tar czf .device/k10/bin.tgz -C .device verify_bench cuda_tests props_tests verify_bench_old \
  verify_bench_front cuda_tests_front verify_bench_cols2 cuda_tests_cols2
ls -la .device/k10/bin.tgz

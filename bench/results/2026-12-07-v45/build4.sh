#!/bin/bash
# Builds and packs what call4.sh runs: this commit's verify_bench, and the merge kernel's
# column-quarter variant (MLAV_MERGE_COLS: one warp per row quarter, branch-free loads, 8 partials
# in flight) linked into verify_bench and cuda_tests.
#   bash bench/results/2026-12-07-v45/build4.sh, then carry [".device/k9"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
BRIEF=1 UNIT=verify_merge LINK=tests/cuda/cuda_tests scripts/variant_bench.sh mergecols \
  cuda/verify_merge.cu -DMLAV_MERGE_COLS
mkdir -p .device/k9
tar czf .device/k9/bin.tgz -C .device verify_bench verify_bench_mergecols cuda_tests_mergecols
ls -la .device/k9/bin.tgz

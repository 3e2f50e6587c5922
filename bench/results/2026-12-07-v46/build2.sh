#!/bin/bash
# Builds and packs what call2.sh runs: this commit's verify_bench and the merge kernel's
# MLAV_MERGE_PASSES variant (one warp per row, its four column quarters in turn, 8 partials'
# loads in flight, only the written partials), linked into verify_bench and cuda_tests; call 1's
# front variant again (verify_bench_front, from build1.sh).
#   bash bench/results/2026-12-07-v46/build2.sh, then carry [".device/k11"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
BRIEF=1 UNIT=verify_merge LINK=tests/cuda/cuda_tests scripts/variant_bench.sh passes \
  cuda/verify_merge.cu -DMLAV_MERGE_PASSES
mkdir -p .device/k11
tar czf .device/k11/bin.tgz -C .device verify_bench cuda_tests verify_bench_passes \
  cuda_tests_passes verify_bench_front
ls -la .device/k11/bin.tgz

#!/bin/bash
# Builds and packs what call1.sh runs, from a clean tree at this commit:
#   .device/k12  the committed default (c6289e9's kernels: v46's build3.sh packs the same);
#   .device/k13  the same with merge_parts.diff applied: the merge kernel with four warps per row,
#                a column quarter each, where one wave of the SMs holds them (choose_merge_parts,
#                MLAV_MERGE_PARTS). The diff is applied for the build and taken back after it.
#   bash bench/results/2026-12-08-v47/build1.sh, then carry [".device/k12", ".device/k13"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
git diff --quiet HEAD -- cuda tests || { echo "build1.sh: cuda/ or tests/ has local changes" >&2; exit 1; }
scripts/device_build.sh > /dev/null
mkdir -p .device/k12 .device/k13
tar czf .device/k12/bin.tgz -C .device verify_bench cuda_tests props_tests
d=bench/results/2026-12-08-v47/merge_parts.diff
git apply "$d"
trap 'git apply -R "$d"' EXIT
scripts/device_build.sh > /dev/null
tar czf .device/k13/bin.tgz -C .device verify_bench cuda_tests props_tests
ls -la .device/k12/bin.tgz .device/k13/bin.tgz

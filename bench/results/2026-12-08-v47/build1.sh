#!/bin/bash
# Builds and packs what call1.sh runs, from a clean tree at this commit:
#   .device/k12  the committed default (c6289e9's kernels: v46's build3.sh packs the same);
#   .device/k13  the same with merge_parts.diff applied: the merge kernel with four warps per row,
#                a column quarter each, where one wave of the SMs holds them (choose_merge_parts,
#                MLAV_MERGE_PARTS);
#   .device/k14  the committed default with bf16_partials.diff applied: the normalized partials
#                stored as bf16 (timing only: not split_plan.h's numerics).
# Each diff is applied for its build and taken back after it; the last build restores .device/
# to the committed tree's binaries.
#   bash bench/results/2026-12-08-v47/build1.sh, then carry [".device/k12", ".device/k13",
#   ".device/k14"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
git diff --quiet HEAD -- cuda tests || { echo "build1.sh: cuda/ or tests/ has local changes" >&2; exit 1; }
with_diff() {  # with_diff DIFF N: build with DIFF applied, pack as kN, take DIFF back
  git apply "$1"
  scripts/device_build.sh > /dev/null || { git apply -R "$1"; exit 1; }
  scripts/device_pack.sh "$2"
  git apply -R "$1"
}
d=bench/results/2026-12-08-v47
scripts/device_build.sh > /dev/null
scripts/device_pack.sh 12
with_diff $d/merge_parts.diff 13
with_diff $d/bf16_partials.diff 14
scripts/device_build.sh > /dev/null

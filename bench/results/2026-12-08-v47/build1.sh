#!/bin/bash
# Builds and packs what call1.sh runs: .device/k13, this tree's binaries (the merge kernel with
# four warps per row where one wave holds them, choose_merge_parts), beside .device/k12 (v46's
# build3.sh: the committed default, c6289e9).
#   bash bench/results/2026-12-07-v46/build3.sh; bash bench/results/2026-12-08-v47/build1.sh,
#   then carry [".device/k12", ".device/k13"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
mkdir -p .device/k13
tar czf .device/k13/bin.tgz -C .device verify_bench cuda_tests props_tests
ls -la .device/k13/bin.tgz

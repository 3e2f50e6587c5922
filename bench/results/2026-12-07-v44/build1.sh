#!/bin/bash
# Builds and packs what call1.sh runs (.device is not in git): this commit's verify_bench,
# cuda_tests and props_tests, and the peer benchmark with the mixed workloads (.device/mixpeer).
#   bash bench/results/2026-12-07-v44/build1.sh, then carry [".device/k7", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
mkdir -p .device/k7
tar czf .device/k7/bin.tgz -C .device verify_bench cuda_tests props_tests
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k7/bin.tgz

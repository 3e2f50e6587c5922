#!/bin/bash
# Builds and packs what call7.sh runs (.device is not in git): this commit's verify_bench and
# cuda_tests, whose sm_120 kernel defaults to the ws ring where its image runs (NOTES v42), and
# the peer benchmark with the mixed workloads (.device/mixpeer).
#   bash bench/results/2026-12-07-v42/build7.sh, then carry [".device/k6", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
mkdir -p .device/k6
tar czf .device/k6/bin.tgz -C .device verify_bench cuda_tests
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k6/bin.tgz

#!/bin/bash
# Builds and packs what call16.sh and call17.sh run (.device is not in git): the shipped
# binaries of this commit (verify_bench, cuda_tests; the ws experiment compiled in) and a copy of
# the peer benchmark with the three mixed batches (v16f's diff) as .device/mixpeer.
#   bash bench/results/2026-12-06-v38/build16.sh   then carry [".device/k16", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_WS_KERNEL=ON MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
rm -rf /tmp/k16 && mkdir -p /tmp/k16 .device/k16
cp .device/verify_bench .device/cuda_tests /tmp/k16/
tar czf .device/k16/bin.tgz -C /tmp/k16 .
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k16/bin.tgz

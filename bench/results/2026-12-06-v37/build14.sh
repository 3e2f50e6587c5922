#!/bin/bash
# Builds and packs what call14.sh runs (.device is not in git): the shipped binaries with the ws
# experiment's new default form (v30's form with tile 0's slot read after setmaxnreg) and the
# route of one-row-tile batches to ring 4 (MLAV_WS_ROUTE), and the peers (../shared/peer).
#   bash bench/results/2026-12-06-v37/build14.sh   then carry [".device/k14", ".device/peer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
rm -rf .device/peer && cp -r ../shared/peer .device/peer
mkdir -p .device/k14
tar czf .device/k14/bin.tgz -C .device verify_bench cuda_tests props_tests racecheck_probe
ls -la .device/k14/bin.tgz

#!/bin/bash
# Builds and packs what call3.sh runs: this commit's binaries (the wgmma kernel's tile 1 after Q
# and the merge over the written partials, both adopted in v46, whose committed form ran on no
# GPU: the device time ran out; their PTX equals the measured variants').
#   bash bench/results/2026-12-07-v46/build3.sh, then carry [".device/k12", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
scripts/device_pack.sh 12 --mixpeer

#!/bin/bash
# What a device call's build script (bench/results/DATE-*/buildN.sh) repeats after
# scripts/device_build.sh: packs the staged verify_bench, cuda_tests and props_tests into
# .device/kN/bin.tgz (scripts/device_call_lib.sh N unpacks them on the device), and with
# --mixpeer copies ../shared/peer to .device/mixpeer with the mixed workloads' patch
# (bench/results/2026-12-01-v16f-peer-bench-mixed.diff).
#   scripts/device_pack.sh N [--mixpeer]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:?usage: scripts/device_pack.sh N [--mixpeer]}
mkdir -p ".device/k$n"
tar czf ".device/k$n/bin.tgz" -C .device verify_bench cuda_tests props_tests
if [ "${2:-}" = --mixpeer ]; then
  rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
  (cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
fi
ls -la ".device/k$n/bin.tgz"

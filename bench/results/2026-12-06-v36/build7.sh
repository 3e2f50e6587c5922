#!/bin/bash
# Builds and packs what call7.sh runs (.device is not in git): v35's build5.sh (the default and
# ring 4 with exp2f as verify_bench_old) and build6.sh (ring 4's trace builds under the
# tensor-rate emulation, K = 1, 2, 3, ex2 and exp2f), packed together into .device/k7.
#   bash bench/results/2026-12-06-v36/build7.sh   then the run tool with
#   carry [".device/k7", ".device/peer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
v35=bench/results/2026-12-06-v35
[ "${SKIP_BUILD:-0}" = 1 ] || { bash $v35/build5.sh; bash $v35/build6.sh; }
rm -rf /tmp/k7 && mkdir -p /tmp/k7 .device/k7
cp .device/verify_bench .device/verify_bench_tr{1,2,3} .device/verify_bench_tr{1,2,3}x /tmp/k7/
cp .device/verify_bench_exp2f /tmp/k7/verify_bench_old
tar czf .device/k7/bin.tgz -C /tmp/k7 .
ls -la .device/k7/bin.tgz

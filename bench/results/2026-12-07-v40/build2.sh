#!/bin/bash
# v40 (staged for the next device time): what the ws mbarrier form still needs before it can be
# the card's default (cuda/NOTES.md v40, Next). This commit's binaries with the ws kernel built
# (its default is now the mbarrier form): verify_bench, cuda_tests, props_tests; and the K = 3
# emulation builds of ring 4, the ws mbarrier form and the named-barrier form, with their K = 2
# builds (wsL2 from build1.sh is the same source as today's default; the named form is now
# -DMLAV_WS_MBAR=0), so that call2.sh can interpolate the card's K = 2.4 as v37 did.
#   bash bench/results/2026-12-07-v40/build2.sh, then carry [".device/k5"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
MLAV_WS_KERNEL=ON MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
export SM90_ONLY=1
export BRIEF=1  # one line per variant: its spills, then its name
v() { UNIT=$1 scripts/variant_bench.sh "$2" cuda/$1.cu "$3"; }  # v UNIT NAME FLAGS
v verify_partial_s2 r4_2 "-DMLAV_MMA_REPEAT=2"
v verify_partial_s2 r4_3 "-DMLAV_MMA_REPEAT=3"
v verify_partial_ws wsL2 "-DMLAV_MMA_REPEAT=2"
v verify_partial_ws wsL3 "-DMLAV_MMA_REPEAT=3"
v verify_partial_ws wsB2 "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=0"
v verify_partial_ws wsB3 "-DMLAV_MMA_REPEAT=3 -DMLAV_WS_MBAR=0"
mkdir -p .device/k5
tar czf .device/k5/bin.tgz -C .device verify_bench cuda_tests props_tests verify_bench_r4_2 \
  verify_bench_r4_3 verify_bench_wsL2 verify_bench_wsL3 verify_bench_wsB2 verify_bench_wsB3
ls -la .device/k5/bin.tgz

#!/bin/bash
# v40: the ws experiment's mbarrier form (MLAV_WS_MBAR=1) with the groups' last meeting on a third
# mbarrier ("1 / l ready") instead of bar.sync 0, which racecheck did not follow (v39 call 3).
# Builds wsL1 (cuda_tests and verify_bench at K = 1) and wsL2 (verify_bench under v20c's
# emulation at K = 2, sm_90a only). Run bench/results/2026-12-07-v39/build1.sh first (it packs
# .device/k1 and builds the K = 2 forms packed here), then carry [".device/k1", ".device/k4"]
# (and ".device/mixpeer" for the H200 table).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export BRIEF=1 UNIT=verify_partial_ws  # one line per variant: its spills, then its name
LINK=tests/cuda/cuda_tests scripts/variant_bench.sh wsL1 cuda/verify_partial_ws.cu \
  "-DMLAV_WS_MBAR=1"
SM90_ONLY=1 scripts/variant_bench.sh wsL2 cuda/verify_partial_ws.cu \
  "-DMLAV_MMA_REPEAT=2 -DMLAV_WS_MBAR=1"
mkdir -p .device/k4
# .device/k4: what call1.sh runs beside .device/k1 (the K = 2 builds of ring 4 and the ws forms
# from v39's build1.sh, the new ones from here).
tar czf .device/k4/bin.tgz -C .device verify_bench_r4_2 verify_bench_wsB2 verify_bench_wsM2 \
  cuda_tests_wsL1 verify_bench_wsL1 verify_bench_wsL2
ls -la .device/k4/bin.tgz

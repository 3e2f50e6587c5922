#!/bin/bash
# Builds and packs what call1.sh runs (.device is not in git): this commit's verify_bench,
# cuda_tests and props_tests; the wgmma kernel's trace build with the prologue split into its
# phases (verify_bench_trace); the late-tile-1 timing variant alone and traced (verify_bench_late1,
# verify_bench_tracelate1); the wgmma object of 0251880 (wg_before.o, copied there before this
# commit's build) for a SASS comparison with this one; the peer benchmark with the mixed workloads.
#   cp build-cuda/cuda/CMakeFiles/mlaverify_cuda_sm90a.dir/verify_partial_wgmma.cu.o /tmp/wg_before.o
#   (at 0251880), then bash bench/results/2026-12-07-v45/build1.sh; carry [".device/k8", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
SM90_ONLY=1 BRIEF=1 scripts/variant_bench.sh trace cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_TRACE
SM90_ONLY=1 BRIEF=1 scripts/variant_bench.sh late1 cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_LATE_TILE1
SM90_ONLY=1 BRIEF=1 scripts/variant_bench.sh tracelate1 cuda/verify_partial_wgmma.cu \
  "-DMLAV_WGMMA_TRACE -DMLAV_WGMMA_LATE_TILE1"
mkdir -p .device/k8
cp /tmp/wg_before.o .device/wg_before.o
cp build-cuda/cuda/CMakeFiles/mlaverify_cuda_sm90a.dir/verify_partial_wgmma.cu.o .device/wg_after.o
tar czf .device/k8/bin.tgz -C .device verify_bench cuda_tests props_tests verify_bench_trace \
  verify_bench_late1 verify_bench_tracelate1 wg_before.o wg_after.o
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k8/bin.tgz

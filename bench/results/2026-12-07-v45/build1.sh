#!/bin/bash
# Builds and packs what call1.sh runs (.device is not in git): this commit's verify_bench,
# cuda_tests and props_tests; the wgmma kernel's trace build with the prologue split into its
# phases (verify_bench_trace); the late-tile-1 timing variant alone and traced (verify_bench_late1,
# verify_bench_tracelate1); the wgmma object of 0251880 (wg_before.o, copied there before this
# commit's build) for a SASS comparison with this one; the peer benchmark with the mixed workloads.
# The staged and mergeil variants left the source after v45 (not adopted); to rebuild them, first
#   git apply bench/results/2026-12-07-v45/staged_mergeil.diff
#   cp build-cuda/cuda/CMakeFiles/mlaverify_cuda_sm90a.dir/verify_partial_wgmma.cu.o /tmp/wg_before.o
#   (at 0251880), then bash bench/results/2026-12-07-v45/build1.sh; carry [".device/k8", ".device/mixpeer"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/device_build.sh > /dev/null
export SM90_ONLY=1 BRIEF=1
v() { scripts/variant_bench.sh "$1" cuda/verify_partial_wgmma.cu "$2"; }
v trace -DMLAV_WGMMA_TRACE
v tracelate1 "-DMLAV_WGMMA_TRACE -DMLAV_WGMMA_LATE_TILE1"
v tracestaged "-DMLAV_WGMMA_TRACE -DMLAV_WGMMA_STAGED_STORE"
v late1 -DMLAV_WGMMA_LATE_TILE1
LINK=tests/cuda/cuda_tests v staged -DMLAV_WGMMA_STAGED_STORE
unset SM90_ONLY  # the merge kernel also serves the sm_120 kernels
UNIT=verify_merge LINK=tests/cuda/cuda_tests scripts/variant_bench.sh mergeil cuda/verify_merge.cu \
  -DMLAV_MERGE_INTERLEAVE
mkdir -p .device/k8
cp /tmp/wg_before.o .device/wg_before.o
cp build-cuda/cuda/CMakeFiles/mlaverify_cuda_sm90a.dir/verify_partial_wgmma.cu.o .device/wg_after.o
tar czf .device/k8/bin.tgz -C .device verify_bench cuda_tests props_tests verify_bench_trace \
  verify_bench_late1 verify_bench_tracelate1 verify_bench_staged verify_bench_tracestaged \
  verify_bench_mergeil cuda_tests_staged cuda_tests_mergeil \
  wg_before.o wg_after.o
rm -rf .device/mixpeer && cp -r ../shared/peer .device/mixpeer
(cd .device/mixpeer && patch -s -p0 < ../../bench/results/2026-12-01-v16f-peer-bench-mixed.diff)
ls -la .device/k8/bin.tgz

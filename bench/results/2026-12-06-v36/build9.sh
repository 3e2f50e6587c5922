#!/bin/bash
# Builds and packs what call9.sh runs (.device is not in git): the default binaries (the wgmma
# kernel now with ex2.approx.ftz) and timing-only builds under v20c's emulation of the card's
# tensor rate (every mma issued K times; results wrong by design): ring 4 (rep2, rep3) and the
# ws experiment's default form (wsrep2, wsrep3).
#   bash bench/results/2026-12-06-v36/build9.sh   then carry [".device/k9"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
for k in 2 3; do
  UNIT=verify_partial_s2 scripts/variant_bench.sh rep$k cuda/verify_partial_s2.cu \
    "-DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- rep$k"
  UNIT=verify_partial_ws scripts/variant_bench.sh wsrep$k cuda/verify_partial_ws.cu \
    "-DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- wsrep$k"
done
rm -rf /tmp/k9 && mkdir -p /tmp/k9 .device/k9
cp .device/verify_bench .device/cuda_tests .device/props_tests .device/verify_bench_rep{2,3} \
  .device/verify_bench_wsrep{2,3} /tmp/k9/
tar czf .device/k9/bin.tgz -C /tmp/k9 .
ls -la .device/k9/bin.tgz

#!/bin/bash
# Builds what call3.sh runs beside build1.sh's binaries: the wgmma kernel's trace build of
# verify_bench (.device/k7t), then repacks nothing else.
set -euo pipefail
cd "$(dirname "$0")/../../.."
scripts/variant_bench.sh trace cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_TRACE > /dev/null
mkdir -p .device/k7t
tar czf .device/k7t/bin.tgz -C .device verify_bench_trace
ls -la .device/k7t/bin.tgz

#!/bin/bash
# Builds and packs what call12.sh runs (.device is not in git). Timing-only builds under v20c's
# emulation of the card's tensor rate (every mma issued K times; results wrong by design),
# compiled for sm_90(a) alone (SM90_ONLY=1):
#   - the ws experiment's default form and v30's form, and v30's form with each later change
#     alone or in v31's order, K = 1, 2, 3 (cuda/NOTES.md v36 asks which change cost ws its
#     gain at slower tensor rates):
#       wsA: today's default (32-key V chunks, row hand-over, S latent rows from the table read
#            early, ex2)
#       wsB: v30's form (-DMLAV_WS_VKEYS=64 -DMLAV_WS_SLAT=0 -DMLAV_WS_HANDOFF=0), ex2
#       wsC: v30's form + 32-key V chunks (v31)
#       wsD: v30's form + the row hand-over (v31), S latent rows still held in registers
#       wsE: wsD + the S loader reading its rows from the table (v31's SLAT, v33's early read)
#       wsF: v30's form with exp2f (-DMLAV_EX2_FTZ=0), as v30 ran it
#   - ring 4 (the sm_120 default), K = 2, 3 (K = 1 is the shipped verify_bench);
#   - ring 4's per-phase trace, K = 1, 2, 3 with ex2 and K = 1 with exp2f (run only on an H200:
#     v36's two card predictions differ by the GPU the trace ran on).
#   bash bench/results/2026-12-06-v37/build12.sh   then carry [".device/k12"]
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-cuda/build.ninja ] || cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLAV_WITH_CUDA=ON -DMLAV_WS_KERNEL=ON
MLAV_RESOURCE_CHECK=warn scripts/device_build.sh > /dev/null
export SM90_ONLY=1
v30="-DMLAV_WS_VKEYS=64 -DMLAV_WS_SLAT=0 -DMLAV_WS_HANDOFF=0"
declare -A form=(
  [wsA]=""
  [wsB]="$v30"
  [wsC]="-DMLAV_WS_SLAT=0 -DMLAV_WS_HANDOFF=0"
  [wsD]="-DMLAV_WS_VKEYS=64 -DMLAV_WS_SLAT=0"
  [wsE]="-DMLAV_WS_VKEYS=64"
  [wsF]="$v30 -DMLAV_EX2_FTZ=0")
bins=(verify_bench)
for k in 1 2 3; do
  for f in wsA wsB wsC wsD wsE wsF; do
    [ $f$k = wsA1 ] && continue  # the shipped binary
    UNIT=verify_partial_ws scripts/variant_bench.sh $f$k cuda/verify_partial_ws.cu \
      "-DMLAV_MMA_REPEAT=$k ${form[$f]}" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
    echo "<- $f$k"
    bins+=(verify_bench_$f$k)
  done
  if [ $k -gt 1 ]; then
    UNIT=verify_partial_s2 scripts/variant_bench.sh r4_$k cuda/verify_partial_s2.cu \
      "-DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
    echo "<- r4_$k"
    bins+=(verify_bench_r4_$k)
  fi
  UNIT=verify_partial_s2 scripts/variant_bench.sh tr$k cuda/verify_partial_s2.cu \
    "-DMLAV_MMA_TRACE -DMLAV_MMA_REPEAT=$k" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
  echo "<- tr$k"
  bins+=(verify_bench_tr$k)
done
UNIT=verify_partial_s2 scripts/variant_bench.sh tr1x cuda/verify_partial_s2.cu \
  "-DMLAV_MMA_TRACE -DMLAV_EX2_FTZ=0" | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' '
echo "<- tr1x"
bins+=(verify_bench_tr1x)
mkdir -p .device/k12
tar czf .device/k12/bin.tgz -C .device "${bins[@]}"
ls -la .device/k12/bin.tgz

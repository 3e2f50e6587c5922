#!/usr/bin/env bash
# The H200 part of issue 14: the CUDA kernel's time against fragmentation for two SPEC §8 shapes
# (k2-tp8-tree16, compute-bound; v3-tp8-chain4, KV-bound), two ways, in one call:
#  1. verify_bench --fragmentation: each request's prefix laid out as 1, 4, 16, ... runs up to
#     P runs (every slot on its own), the kernel alone in CUDA graphs (median of replays), for
#     the Hopper kernel (wgmma) and the sm_120 configuration (mma2);
#  2. `mlaverify simulate --backend cuda` for the same shapes with defragmentation off (slots
#     scatter as requests come and go) and tier 1 every 100 steps: the CSVs carry
#     runs_per_request and kernel_ms (CUDA events around the step's kernels) per step, and
#     kernel_vs_fragmentation.txt bins kernel_ms by runs per request.
# Usage (on the device machine, from the repository root, binaries staged by
# scripts/device_build.sh in $BIN, default .device):
#   scripts/device_simulate.sh [steps [shape [policy]]]     e.g. 1000, or 1500 k2-tp8-tree16 off
# Writes under ${OUT:-out}/simulate/. MLAV_SIM_BACKEND=cpu runs part 2 on the CPU (a local smoke
# test of this script; use few steps).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-1000}
only_shape=${2:-}
only_policy=${3:-}
out=${OUT:-out}/simulate
mkdir -p "$out"
BIN=${BIN:-.device}
# The CLI links Cairo (plots); the device image may not have it: libraries staged beside it.
[ -d "$BIN/lib" ] && export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
backend=${MLAV_SIM_BACKEND:-cuda}
"$BIN/mlaverify" backends | grep -qx "$backend" || { echo "no $backend backend in $BIN/mlaverify"; exit 1; }

if [ "$backend" = cuda ]; then
  for kernel in wgmma mma2; do
    MLAV_CUDA_KERNEL=$kernel timeout 240 "$BIN/verify_bench" --fragmentation \
      ${only_shape:+--only $only_shape} 2>&1 | tee "$out/bench_fragmentation_$kernel.txt"
  done
fi

# name: simulate options reproducing the shape (bs = max-running, H from preset/tp, D, P ~ prompt)
declare -A shapes=(
  [k2-tp8-tree16]="--preset kimi-k2 --tp 8 --tree ddtree --tree-budget 16 --max-running 16 \
    --prompt-min 7680 --prompt-max 8192 --output-min 256 --output-max 512 --arrival-rate 0.2 \
    --pool-size 180000 --num-splits 8"
  [v3-tp8-chain4]="--preset deepseek-v3 --tp 8 --tree mtp --mtp-len 4 --max-running 32 \
    --prompt-min 3584 --prompt-max 4096 --output-min 128 --output-max 256 --arrival-rate 0.4 \
    --pool-size 180000 --num-splits 4"
)
for name in k2-tp8-tree16 v3-tp8-chain4; do
  [ -n "$only_shape" ] && [ "$name" != "$only_shape" ] && continue
  for policy in off tier1-every; do
    [ -n "$only_policy" ] && [ "$policy" != "$only_policy" ] && continue
    tag="${name}_${policy}"
    # The model check is a double-precision CPU pass (seconds at these P): every 400th step; the
    # kernel runs and is timed every step.
    timeout 300 "$BIN/mlaverify" simulate --backend "$backend" --steps "$steps" ${shapes[$name]} \
      --defrag "$policy" --defrag-every 100 --check-every 400 --run-every 1 \
      --graph-sizes 1,2,4,8,16,24,32 --csv "$out/$tag.csv" --plot "$out/$tag" \
      --scenario-dir "$out/failures" > "$out/$tag.txt" 2>/dev/null || echo "$tag: exit $?"
    cat "$out/$tag.txt"
  done
done
# kernel_ms (column 21; backend_ms, column 19, where the backend has no device timer) binned by
# runs per request in powers of two, over the steps that ran the backend.
for f in "$out"/*.csv; do
  [ -e "$f" ] || continue
  awk -F, -v name="$(basename "$f" .csv)" 'NR > 1 && $19 >= 0 {
      t = $21 >= 0 ? $21 : $19; b = 1; while (b * 2 <= $11) b *= 2; n[b]++; s[b] += t
      if (!(b in lo) || t < lo[b]) lo[b] = t; if (t > hi[b]) hi[b] = t }
    END { for (b in n) printf "%s runs/request %d-%d: %d steps, kernel ms mean %.3f min %.3f max %.3f\n",
          name, b, 2 * b - 1, n[b], s[b] / n[b], lo[b], hi[b] }' "$f" | sort -t' ' -k1,1 -k3n
done > "$out/kernel_vs_fragmentation.txt"
cat "$out/kernel_vs_fragmentation.txt"

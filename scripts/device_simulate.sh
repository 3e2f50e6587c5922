#!/usr/bin/env bash
# The H200 part of issue 14: the CUDA kernel's time against fragmentation for two SPEC §8 shapes,
# from `mlaverify simulate --backend cuda`. For each shape, a pool whose requests hold about the
# shape's P, with defragmentation off (slots scatter as requests come and go) and tier 1 every
# 100 steps (each request one ascending run right after compaction): the CSVs carry
# runs_per_request and backend_ms per step, the plots show both over steps, and
# kernel_vs_fragmentation.txt bins backend time by runs per request.
# Usage (on the device machine, from the repository root):
#   scripts/device_simulate.sh [steps [shape [policy]]]   e.g. 1500 k2-tp8-tree16 off
# One (shape, policy) per call keeps a call under the device's 10-minute limit; with no shape all
# four runs go in one call (use fewer steps then, e.g. 400).
# Writes under ${OUT:-out}/simulate/. Needs a CUDA build (scripts/build.sh builds one when nvcc
# is present). backend_ms is the wall time of Backend::run: host staging and the copies included
# (the CUDA backend stages host params each call), so compare policies, not absolute kernel time.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-1500}
out=${OUT:-out}/simulate
mkdir -p "$out"
MLAV_JOBS=${MLAV_JOBS:-$(nproc)} scripts/build.sh mlaverify > "$out/build.log" 2>&1 || {
  tail -30 "$out/build.log"; exit 1; }
backend=${MLAV_SIM_BACKEND:-cuda}  # cpu: a local smoke test of this script
./build/cli/mlaverify backends | grep -qx "$backend" || { echo "no $backend backend in this build"; exit 1; }
# name: simulate options reproducing the shape (bs = max-running, H from preset/tp, D, P ~ prompt)
declare -A shapes=(
  [k2-tp8-tree16]="--preset kimi-k2 --tp 8 --tree ddtree --tree-budget 16 --max-running 16 \
    --prompt-min 7680 --prompt-max 8192 --output-min 256 --output-max 512 --arrival-rate 0.2 \
    --pool-size 180000 --num-splits 8"
  [v3-tp8-chain4]="--preset deepseek-v3 --tp 8 --tree mtp --mtp-len 4 --max-running 32 \
    --prompt-min 3584 --prompt-max 4096 --output-min 128 --output-max 256 --arrival-rate 0.4 \
    --pool-size 180000 --num-splits 4"
)
only_shape=${2:-}
only_policy=${3:-}
for name in "${!shapes[@]}"; do
  [ -n "$only_shape" ] && [ "$name" != "$only_shape" ] && continue
  for policy in off tier1-every; do
    [ -n "$only_policy" ] && [ "$policy" != "$only_policy" ] && continue
    tag="${name}_${policy}"
    # The model check is a double-precision CPU pass (tens of seconds at these P): every 500th
    # step; the kernel runs and is timed every step.
    timeout 560 ./build/cli/mlaverify simulate --backend "$backend" --steps "$steps" ${shapes[$name]} \
      --defrag "$policy" --defrag-every 100 --check-every 500 --run-every 1 \
      --graph-sizes 1,2,4,8,16,24,32 --csv "$out/$tag.csv" --plot "$out/$tag" \
      --scenario-dir "$out/failures" > "$out/$tag.txt" 2>/dev/null || echo "$tag: exit $?"
    cat "$out/$tag.txt"
  done
done
# backend_ms binned by runs per request in powers of two (steps that ran the backend).
for f in "$out"/*.csv; do
  awk -F, -v name="$(basename "$f" .csv)" 'NR > 1 && $19 >= 0 {
      b = 1; while (b * 2 <= $11) b *= 2; n[b]++; s[b] += $19 }
    END { for (b in n) printf "%s runs/request %d-%d: %d steps, mean backend %.3f ms\n",
          name, b, 2 * b - 1, n[b], s[b] / n[b] }' "$f" | sort -t' ' -k1,1 -k3n
done > "$out/kernel_vs_fragmentation.txt"
cat "$out/kernel_vs_fragmentation.txt"

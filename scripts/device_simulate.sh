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
./build/cli/mlaverify backends | grep -qx cuda || { echo "no cuda backend in this build"; exit 1; }
# name: simulate options reproducing the shape (bs = max-running, H from preset/tp, D, P ~ prompt)
declare -A shapes=(
  [k2-tp8-tree16]="--preset kimi-k2 --tp 8 --tree ddtree --tree-budget 16 --max-running 16 \
    --prompt-min 7680 --prompt-max 8192 --output-min 256 --output-max 512 --arrival-rate 0.2 \
    --pool-size 180000"
  [v3-tp8-chain4]="--preset deepseek-v3 --tp 8 --tree mtp --mtp-len 4 --max-running 32 \
    --prompt-min 3584 --prompt-max 4096 --output-min 128 --output-max 256 --arrival-rate 0.4 \
    --pool-size 180000"
)
only_shape=${2:-}
only_policy=${3:-}
for name in "${!shapes[@]}"; do
  [ -n "$only_shape" ] && [ "$name" != "$only_shape" ] && continue
  for policy in off tier1-every; do
    [ -n "$only_policy" ] && [ "$policy" != "$only_policy" ] && continue
    tag="${name}_${policy}"
    # The model check is a double-precision CPU pass: sampled rarely; the kernel runs every step.
    timeout 560 ./build/cli/mlaverify simulate --backend cuda --steps "$steps" ${shapes[$name]} \
      --defrag "$policy" --defrag-every 100 --check-every 250 --run-every 1 \
      --graph-sizes 1,2,4,8,16,24,32 --csv "$out/$tag.csv" --plot "$out/$tag" \
      --scenario-dir "$out/failures" > "$out/$tag.txt" 2>/dev/null || echo "$tag: exit $?"
    cat "$out/$tag.txt"
  done
done
# backend_ms binned by runs per request (steps that ran the backend), per shape and policy.
for f in "$out"/*.csv; do
  awk -F, -v name="$(basename "$f" .csv)" 'NR > 1 && $19 >= 0 {
      b = int($11 / 4) * 4; n[b]++; s[b] += $19 }
    END { for (b in n) printf "%s runs/request %d-%d: %d steps, mean backend %.3f ms\n",
          name, b, b + 3, n[b], s[b] / n[b] }' "$f" | sort -t' ' -k3 -n
done > "$out/kernel_vs_fragmentation.txt"
cat "$out/kernel_vs_fragmentation.txt"

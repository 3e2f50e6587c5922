#!/usr/bin/env bash
# The issue-14 acceptance runs: 10,000 simulated steps for page sizes 1 and 16 under every
# defragmentation policy on the CPU backend, every invariant checked every step and the attention
# every 50th; CSV, plots and the summary of each under docs/simulate/ (summary.txt collects them).
# Usage: scripts/simulate_matrix.sh [backend] [extra simulate options...]   (MLAV_JOBS: parallel runs)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${1:-cpu}
shift || true
out=docs/simulate
mkdir -p "$out"
jobs=${MLAV_JOBS:-2}
run() {
  local ps=$1 policy=$2
  shift 2
  ./build/cli/mlaverify simulate --backend "$backend" --steps 10000 --check-every 50 \
    --pool-size 8192 --page-size "$ps" --defrag "$policy" --frag-threshold 24 --defrag-every 500 \
    --csv "$out/p${ps}_${policy}.csv" --plot "$out/p${ps}_${policy}" \
    --scenario-dir "$out/failures" "$@" > "$out/p${ps}_${policy}.txt" 2>/dev/null
  echo "page $ps $policy: exit $?"
}
export -f run
export backend out
for ps in 1 16; do
  for policy in off tier0 tier1-threshold tier1-every; do
    echo "$ps $policy"
  done
done | xargs -P "$jobs" -L 1 bash -c 'run "$0" "$1" '"$*"
cat "$out"/p*_*.txt > "$out/summary.txt"

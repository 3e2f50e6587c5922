#!/bin/bash
# Builds a timing-only variant of the benchmark: verify_bench linked against a modified copy of
# the Hopper partial kernel, staged as .device/verify_bench_NAME beside the real one, so one
# device call can time both (cuda/NOTES.md v13: "no softmax", "no gather", "no draft blocks").
# Variants are measurements, never the kernel: nothing here touches build-cuda's own objects.
# The per-block timing trace is such a variant of the kernel itself (cuda/NOTES.md v14):
#   scripts/variant_bench.sh trace cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_TRACE
# then on the device .device/verify_bench_trace > t.txt, and scripts/trace_summary.py t.txt.
# usage: scripts/variant_bench.sh NAME SOURCE [extra nvcc flags]
#   SOURCE: an edited copy of cuda/verify_partial_wgmma.cu (anywhere; includes resolve against
#   the repository). Run scripts/device_build.sh first (it configures build-cuda).
set -euo pipefail
name=$1
src=$(realpath "$2")
flags=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/build-cuda"
obj=cuda/CMakeFiles/mlaverify_cuda_sm90a.dir/verify_partial_wgmma.cu.o
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The object's own compile line, pointed at the variant source and a scratch object; -I the
# repository so the variant's "cuda/..." includes resolve from anywhere.
cmd=$(ninja -t commands "$obj" | tail -1)
cmd=${cmd//"$root/cuda/verify_partial_wgmma.cu"/"$src"}
cmd=$(echo "$cmd" | sed -e "s# -o [^ ]*\.o# -o $work/variant.o -I$root $flags#")
eval "$cmd" 2>&1 | grep -E "error|C75|spill|Used" || true
[ -f "$work/variant.o" ] || { echo "variant $name: compile failed" >&2; exit 1; }
cp cuda/libmlaverify_cuda.a "$work/lib.a"
member=$(ar t "$work/lib.a" | grep verify_partial_wgmma)
cp "$work/variant.o" "$work/$member"
(cd "$work" && ar r lib.a "$member")
link=$(ninja -t commands bench/gpu/verify_bench | tail -1)
link=${link//"cuda/libmlaverify_cuda.a"/"$work/lib.a"}
link=$(echo "$link" | sed -e "s# -o bench/gpu/verify_bench # -o $root/.device/verify_bench_$name #")
eval "${link#: && }" >/dev/null
echo "staged .device/verify_bench_$name"

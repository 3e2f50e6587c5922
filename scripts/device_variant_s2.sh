#!/bin/bash
# Builds a timing-only variant of the benchmark against a modified copy of the sm_120-sized
# partial kernel's file (cuda/verify_partial_s2.cu), staged as .device/verify_bench_NAME beside
# the real one; the sm_120 twin of scripts/variant_bench.sh (which does this for the wgmma file).
# The per-phase cycle trace of the sm_120 kernel (cuda/NOTES.md v16e):
#   scripts/device_variant_s2.sh mmatrace cuda/verify_partial_s2.cu -DMLAV_MMA_TRACE
# then on the device MLAV_CUDA_KERNEL=mma2 .device/verify_bench_mmatrace prints an MMATRACE line
# (cycles per tile by phase, prologue, epilogue) after each workload.
# usage: scripts/device_variant_s2.sh NAME SOURCE [extra nvcc flags]
#   Run scripts/device_build.sh first (it configures build-cuda).
set -euo pipefail
name=$1
src=$(realpath "$2")
flags=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/build-cuda"
unit=verify_partial_s2
obj=cuda/CMakeFiles/mlaverify_cuda.dir/$unit.cu.o
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The object's own compile line, pointed at the variant source and a scratch object; -I the
# repository so the variant's "cuda/..." includes resolve from anywhere.
cmd=$(ninja -t commands "$obj" | tail -1)
cmd=${cmd//"$root/cuda/$unit.cu"/"$src"}
cmd=$(echo "$cmd" | sed -e "s# -o [^ ]*\.o# -o $work/variant.o -I$root $flags#")
eval "$cmd" 2>&1 | grep -E "error|C75|spill|Used" || true
[ -f "$work/variant.o" ] || { echo "variant $name: compile failed" >&2; exit 1; }
cp cuda/libmlaverify_cuda.a "$work/lib.a"
member=$(ar t "$work/lib.a" | grep "$unit")
cp "$work/variant.o" "$work/$member"
(cd "$work" && ar r lib.a "$member")
link=$(ninja -t commands bench/gpu/verify_bench | tail -1)
link=${link//"cuda/libmlaverify_cuda.a"/"$work/lib.a"}
mkdir -p "$root/.device"
link=$(echo "$link" | sed -e "s# -o bench/gpu/verify_bench # -o $root/.device/verify_bench_$name #")
eval "${link#: && }" >/dev/null
echo "staged .device/verify_bench_$name"

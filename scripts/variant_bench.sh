#!/bin/bash
# Builds a timing-only variant of the benchmark: verify_bench linked against a modified copy of
# one partial kernel's file, staged as .device/verify_bench_NAME beside the real one, so one
# device call can time both (cuda/NOTES.md v13: "no softmax", "no gather", "no draft blocks").
# Variants are measurements, never the kernel: nothing here touches build-cuda's own objects.
# The per-block timing traces are such variants of the kernels themselves:
#   scripts/variant_bench.sh trace cuda/verify_partial_wgmma.cu -DMLAV_WGMMA_TRACE   (NOTES v14)
#   then on the device .device/verify_bench_trace > t.txt, and scripts/trace_summary.py t.txt;
#   UNIT=verify_partial_s2 scripts/variant_bench.sh mmatrace cuda/verify_partial_s2.cu \
#     -DMLAV_MMA_TRACE   (the sm_120 kernel, NOTES v16e: MLAV_CUDA_KERNEL=mma2
#   .device/verify_bench_mmatrace prints an MMATRACE line per workload).
#   UNIT=verify_plan scripts/variant_bench.sh plantrace cuda/verify_plan.cu -DMLAV_PLAN_TRACE
#   (the balanced plan's planning kernel, cuda/NOTES.md v18: a PLANTRACE line every 64th plan).
# usage: [UNIT=verify_partial_wgmma|verify_partial_s2|verify_partial_ws|verify_plan|verify_merge]
#        [LINK=tests/cuda/cuda_tests] [ARCH_A=1] [SM90_ONLY=1] scripts/variant_bench.sh NAME SOURCE [flags]
#   SM90_ONLY=1: the unit compiled for sm_90(a) alone (timing variants run on the H100/H200).
#   BRIEF=1: one line for the variant, its compile's spill lines counted then "<- NAME" (what the
#   device calls' build scripts print per variant), instead of ptxas's lines and the staged files.
#   ARCH_A=1: the unit's targets made arch-specific (sm_90 -> sm_90a, sm_120 -> sm_120a), for
#   variants that need setmaxnreg (MLAV_COPY_WARPS, cuda/NOTES.md v28).
#   SOURCE: an edited copy of cuda/$UNIT.cu (anywhere; includes resolve against the repository).
#   Run scripts/device_build.sh first (it configures build-cuda).
set -euo pipefail
name=$1
src=$(realpath "$2")
flags=${3:-}
unit=${UNIT:-verify_partial_wgmma}
case "$unit" in
  verify_partial_wgmma) target=mlaverify_cuda_sm90a ;;  # the sm_90a-only library
  verify_partial_s2|verify_plan|verify_merge) target=mlaverify_cuda ;;
  verify_partial_ws) target=mlaverify_cuda_ws ;;  # sm_90a and sm_120a (setmaxnreg)
  *) echo "UNIT=$unit: expected verify_partial_wgmma, verify_partial_s2, verify_partial_ws," \
       "verify_plan or verify_merge" >&2
     exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/build-cuda"
obj=cuda/CMakeFiles/$target.dir/$unit.cu.o
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The object's own compile line, pointed at the variant source and a scratch object; -I the
# repository so the variant's "cuda/..." includes resolve from anywhere.
cmd=$(ninja -t commands "$obj" | tail -1)
cmd=${cmd//"$root/cuda/$unit.cu"/"$src"}
cmd=$(echo "$cmd" | sed -e "s# -o [^ ]*\.o# -o $work/variant.o -I$root $flags#")
if [ "${ARCH_A:-0}" = 1 ]; then
  cmd=$(echo "$cmd" | sed -E 's/(compute|sm)_([0-9]+)([],])/\1_\2a\3/g')
  echo "$cmd" | grep -q "sm_90a" || { echo "variant $name: ARCH_A found no sm_90 target" >&2; exit 1; }
fi
if [ "${SM90_ONLY:-0}" = 1 ]; then
  # Timing-only variants for the H100/H200 need no sm_120 code: half the compile time.
  cmd=$(echo "$cmd" | sed -E 's/ (-gencode=arch=compute_120a?,code=[^ ]*|--generate-code=arch=compute_120a?,code=\[[^]]*\])//g')
  echo "$cmd" | grep -q "compute_120" && { echo "variant $name: SM90_ONLY left an sm_120 target" >&2; exit 1; }
fi
if [ "${BRIEF:-0}" = 1 ]; then
  echo "$(eval "$cmd" 2>&1 | grep -E 'spill|error' | sort | uniq -c | tr '\n' ' ')<- $name"
else
  eval "$cmd" 2>&1 | grep -E "error|C75|spill|Used" || true
fi
[ -f "$work/variant.o" ] || { echo "variant $name: compile failed" >&2; exit 1; }
cp "$work/variant.o" "$root/.device/${unit}_$name.o"  # the object itself, for its SASS
cp cuda/libmlaverify_cuda.a "$work/lib.a"
member=$(ar t "$work/lib.a" | grep "$unit")
cp "$work/variant.o" "$work/$member"
(cd "$work" && ar r lib.a "$member")
# The benchmark, and with LINK=tests/cuda/cuda_tests also the CUDA tests (a variant that changes
# results, not only timing, is tested before it is timed), each linked against the variant.
for target in bench/gpu/verify_bench ${LINK:-}; do
  base=$(basename "$target")
  link=$(ninja -t commands "$target" | tail -1)
  link=${link//"cuda/libmlaverify_cuda.a"/"$work/lib.a"}
  mkdir -p "$root/.device"
  link=$(echo "$link" | sed -e "s# -o $target # -o $root/.device/${base}_$name #")
  link=${link%% && cd *}  # the link alone: cuda_tests' command goes on to gtest discovery
  (eval "${link#: && }") >/dev/null
  [ "${BRIEF:-0}" = 1 ] || echo "staged .device/${base}_$name"
done

#!/bin/bash
# Session 17, call 1: the copy warpgroup (MLAV_COPY_WARPS=1, cuda/NOTES.md v28), first run.
# The default build's partial-kernel SASS against c72e14e's (the variant's code must not move
# it); the variant's setmaxnreg and registers in SASS; cuda_tests on mma2 linked against it (a
# hang shows as rc 124); then the benchmark, two interleaved rounds beside the kernel under the
# uniform plan, one balanced round each, and the per-block traces of both.
source scripts/device_call_lib.sh 1
sass_diff default .device/k1/prev_verify_partial_s2.cu.o .device/k1/new_verify_partial_s2.cu.o
sass .device/k1/cw_verify_partial_s2.cu.o > $O/cw.sass
python3 - $O/cw.sass <<'PY'
import re, sys
# Functions in cuobjdump order are not marked in the stripped listing: count over all of it.
s = open(sys.argv[1]).read()
print("cw sass: USETMAXREG", len(re.findall(r"USETMAXREG", s)), "| LDGSTS", s.count("LDGSTS"),
      "| SYNCS", len(re.findall(r"SYNCS", s)), "| max register R%d" % max(int(x) for x in re.findall(r"\bR(\d+)\b", s)))
for l in s.splitlines():
    if "USETMAXREG" in l: print("  ", l.strip())
PY
MLAV_CUDA_KERNEL=mma2 timeout 60 $B/cuda_tests_cw --gtest_filter='*Graph*' > $O/tests_cw_graph.log 2>&1
echo "cuda_tests_cw graph rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_cw_graph.log | head -2 | tr '\n' ' ')"
run_tests mma2 cuda_tests_cw
t tests
for round in 1 2; do
  run_bench base_$round mma2 uniform
  run_bench cw_$round mma2 uniform verify_bench_cw
done
run_bench base_bal mma2 balanced
run_bench cw_bal mma2 balanced verify_bench_cw
t bench
for v in mmatrace cwtrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"
  grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
t traces
finish

#!/bin/bash
# Session 11, call 4: the refinement within the old grid (units <= plan_blocks + row tiles) against
# the refinement with a grid of 2 plan_blocks (call 3's build) and the plan before the refinement
# (2ee6730), alternated; cuda_tests (the graph test now requires a refined replay) and racecheck of
# the balanced tests on the final build.
export LD_LIBRARY_PATH=.device/lib; O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 60 .device/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
  grep -E "^\[  FAILED  \] [A-Z]|Failure" -A3 $O/tests_$k.log | head -8
done
MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 .device/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/san_racecheck_mma2.log 2>&1
echo "racecheck mma2 rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_racecheck_mma2.log | tr '\n' ' ')"
t tests
for round in 1 2; do for b in base grid2 new; do for k in mma2 wgmma; do
  bin=.device/verify_bench_$b; [ $b = new ] && bin=.device/verify_bench
  MLAV_CUDA_KERNEL=$k timeout 40 $bin > $O/bench_${k}_${b}_$round.txt 2>&1
  echo "$k $b r$round rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_${b}_$round.txt | awk '{printf "%s ", $3}')"
done; done; done
t bench
gzip -f $O/*.log; tar czf $OUT/k25.tgz -C $O .

#!/bin/bash
# Session 14, call 3: the merge kernel with two warps per row (each for 256 of the 512 columns,
# every column summed in the same order: the same bits), against the one-warp merge
# (verify_bench_mergeold: the committed verify_merge.cu linked in), both kernels, both plans,
# two interleaved rounds; cuda_tests on mma2, wgmma and mma6 and memcheck on the merge's users.
B=/tmp/b3; rm -rf $B; mkdir -p $B; tar xzf .device/k3/bin.tgz -C $B
O=/tmp/o3; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma mma6; do
  MLAV_CUDA_KERNEL=$k timeout 90 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $O/tests_$k.log | head -5
done
t tests
for k in mma2 wgmma; do
  MLAV_CUDA_KERNEL=$k timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*:*Split*:*Merge*' > $O/memcheck_$k.log 2>&1
  echo "memcheck $k rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/memcheck_$k.log | head -3 | tr '\n' ' ')"
done
t memcheck
for round in 1 2; do for k in wgmma mma2; do for plan in balanced uniform; do for v in mergeold now; do
  b=$B/verify_bench; [ $v = mergeold ] && b=$B/verify_bench_mergeold
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $b > $O/bench_${k}_${plan}_${v}_$round.txt 2>&1
  echo "r$round $k $plan $v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_${plan}_${v}_$round.txt | awk '{printf "%s ", $3}')"
done; done; done; done
t bench
gzip -f $O/*.log
tar czf $OUT/call3.tgz -C $O .

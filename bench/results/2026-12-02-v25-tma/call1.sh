#!/bin/bash
# Session 13, call 1: the TMA variant of ring 4 (MLAV_TMA_KV=1: each KV chunk as 64 one-row
# cp.async.bulk.tensor copies completing on an mbarrier; maps as a __grid_constant__ parameter),
# first run on a device: cuda_tests on it and on the kernel (mma2), racecheck and memcheck on it,
# the benchmark (uniform plan) beside the kernel's, and per-phase traces of both.
B=/tmp/b1; rm -rf $B; mkdir -p $B; tar xzf .device/k1/bin.tgz -C $B
O=/tmp/o1; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for v in tma plain; do
  b=$B/cuda_tests_tma; [ $v = plain ] && b=$B/cuda_tests
  MLAV_CUDA_KERNEL=mma2 timeout 120 $b > $O/tests_$v.log 2>&1; rc=$?
  echo "cuda_tests $v rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$v.log | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $O/tests_$v.log | head -8
  t tests_$v
  [ $v = tma ] && [ $rc -ne 0 ] && { grep -B2 -A12 -m3 'Failure\|error' $O/tests_tma.log | head -60; }
done
for v in tma plain; do
  b=$B/verify_bench_tma; [ $v = plain ] && b=$B/verify_bench
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $b > $O/bench_$v.txt 2>&1
  echo "bench $v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_$v.txt | awk '{printf "%s ", $3}')"
done
grep -iE 'warning|error' $O/bench_tma.txt | head -3
t bench
tar czf $OUT/call1.tgz -C $O .
for v in trace0 tmatrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
t traces
tar czf $OUT/call1.tgz -C $O .
for tool in racecheck memcheck; do
  MLAV_CUDA_KERNEL=mma2 timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/cuda_tests_tma --gtest_filter='*balanced*:*CudaGraph*:*tile_edges*:*cache_slots_paged*:*NanPoisoned*:*h1_d1_p0*' > $O/san_$tool.log 2>&1
  echo "compute-sanitizer $tool tma rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/san_$tool.log | head -3 | tr '\n' ' ')"
done
t sanitize
gzip -f $O/*.log
tar czf $OUT/call1.tgz -C $O .

#!/bin/bash
# Session 13, call 2: call 1's TMA variant ran 6x slower (a chunk's 64 row copies took ~3.7K
# cycles, all issued by warp 0). MLAV_TMA_KV=2 spreads the issue over lanes 0-7 of all 8 warps;
# MLAV_TMA_KV=3 (timing-only, unswizzled, garbage results) issues plain bulk copies
# (cp.async.bulk, no tensor map) the same way. cuda_tests on 2, the benchmark and traces of both.
B=/tmp/b2; rm -rf $B; mkdir -p $B; tar xzf .device/k2/bin.tgz -C $B
O=/tmp/o2; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
MLAV_CUDA_KERNEL=mma2 timeout 120 $B/cuda_tests_tma2 > $O/tests_tma2.log 2>&1; rc=$?
echo "cuda_tests tma2 rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_tma2.log | head -3 | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $O/tests_tma2.log | head -8
t tests
for v in tma2 bulk; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v > $O/bench_$v.txt 2>&1
  echo "bench $v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_$v.txt | awk '{printf "%s ", $3}')"
done
for v in tma2trace bulktrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
t bench
gzip -f $O/*.log
tar czf $OUT/call2.tgz -C $O .

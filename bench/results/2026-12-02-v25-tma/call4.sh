#!/bin/bash
# Session 13, call 4: plan_chunk without the wave chunk's probe (it always fits; v24's planner
# as verify_bench_wave), planning-kernel cost beside v24's, both kernels' balanced benchmark;
# the new balanced CUDA case (bs <= 4, a request of 32 splits x 4 row tiles: the warp-per-request
# stores' units k >= 32) on mma2, wgmma and mma6, and the mutant that stores only units k < 32;
# can_implement after a lost context throws BackendLost (CudaBackend and the CUDA plugin): the
# two death tests and their mutants (can_implement without the throw).
B=/tmp/b4; rm -rf $B; mkdir -p $B; tar xzf .device/k4/bin.tgz -C $B
O=/tmp/o4; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma mma6; do
  MLAV_CUDA_KERNEL=$k timeout 90 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ') $(grep -cE '^\[       OK \].*balanced_warp_stores' $O/tests_$k.log) warp-stores OK"
  grep -E '^\[  FAILED  \]' $O/tests_$k.log | head -5
done
t tests
for k in mma2 wgmma; do
  MLAV_CUDA_KERNEL=$k timeout 60 $B/cuda_tests_plmut --gtest_filter='*balanced*' > $O/tests_plmut_$k.log 2>&1
  echo "mutant (units k < 32 only) $k rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_plmut_$k.log | head -3 | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' $O/tests_plmut_$k.log | head -4
done
t mutant
for k in wgmma mma2; do for v in wave now; do
  b=$B/verify_bench; [ $v = wave ] && b=$B/verify_bench_wave
  MLAV_CUDA_KERNEL=$k timeout 60 $b --plan-cost > $O/plancost_${k}_$v.txt 2>&1
  echo "plan-cost $k $v rc=$?: $(grep '^plan-cost' $O/plancost_${k}_$v.txt | awk '{printf "%s ", $3}')"
done; done
for k in mma2 wgmma; do for v in wave now; do
  b=$B/verify_bench; [ $v = wave ] && b=$B/verify_bench_wave
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=balanced timeout 60 $b > $O/bench_${k}_$v.txt 2>&1
  echo "bench $k balanced $v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_$v.txt | awk '{printf "%s ", $3}')"
done; done
t bench
MLAV_CUDA_KERNEL=mma2 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/san_memcheck.log 2>&1
echo "compute-sanitizer memcheck mma2 rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/san_memcheck.log | head -3 | tr '\n' ' ')"
t memcheck
export MLAV_CUDA_PLUGIN=$B/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=$B/libmlav_test_fault_cuda_plugin.so MLAV_PLUGIN_WORKER=$B/mlaverify-plugin-worker
for v in now lostmut; do
  s=; [ $v = lostmut ] && s=_lostmut
  timeout 60 $B/cuda_tests$s --gtest_filter='*LostDeathTest*' > $O/death_cuda_$v.log 2>&1
  echo "CudaBackend death test $v rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/death_cuda_$v.log | head -2 | tr '\n' ' ') $(grep -m1 -o 'Actual msg\|exit code [0-9]*\|Result: .*' $O/death_cuda_$v.log)"
  timeout 90 $B/cuda_plugin_tests$s --gtest_filter='*LostDeathTest*' > $O/death_plugin_$v.log 2>&1
  echo "plugin death tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/death_plugin_$v.log | head -2 | tr '\n' ' ') $(grep -o 'exit code [0-9]*\|Result: .*' $O/death_plugin_$v.log | head -2 | tr '\n' ' ')"
done
t death
gzip -f $O/*.log
tar czf $OUT/call4.tgz -C $O .

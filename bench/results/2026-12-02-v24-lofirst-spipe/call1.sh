#!/bin/bash
# Session 12, call 1: the balanced plan's even-share-first chunk (lo-first) against the base
# (fbcacea's verify_bench), the S pass's fragment order variant MLAV_S_PIPE=1 (timing-only), the
# per-phase trace of both, ring 4's SASS, and cuda_plugin_tests as a whole.
B=/tmp/b1; rm -rf $B; mkdir -p $B; tar xzf .device/k1/bin.tgz -C $B
export LD_LIBRARY_PATH=$B/lib; O=$OUT; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in mma2 wgmma; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 90 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
done
t tests
for k in wgmma mma2; do for v in base new; do
  b=$B/verify_bench; [ $v = base ] && b=$B/verify_bench_base
  MLAV_CUDA_KERNEL=$k timeout 60 $b --plan-cost > $O/plancost_${k}_$v.txt 2>&1
  echo "plan-cost $k $v rc=$?: $(grep '^plan-cost' $O/plancost_${k}_$v.txt | awk '{printf "%s ", $3}')"
done; done
t plancost
for round in 1 2; do
  for cfg in base/mma2/balanced new/mma2/balanced base/wgmma/balanced new/wgmma/balanced base/mma2/uniform pipe1/mma2/uniform pipe1/mma2/balanced; do
    IFS=/ read -r v k plan <<<"$cfg"
    b=$B/verify_bench_$v; [ $v = new ] && b=$B/verify_bench
    MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $b > $O/bench_${v}_${k}_${plan}_$round.txt 2>&1
    echo "$v $k $plan r$round rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${v}_${k}_${plan}_$round.txt | awk '{printf "%s ", $3}')"
  done
done
t bench
for v in trace0 trace1; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?"; grep MMATRACE $O/$v.txt | head -9
done
t trace
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass -fun '_ZN9mlaverify4cuda6detail14verify_partialILi4ELi64ELi0ELb1EEEvNS1_11PartialArgsE' $B/verify_bench > $O/sass_ring4_pipe0.txt 2>&1
  cuobjdump -sass -fun '_ZN9mlaverify4cuda6detail14verify_partialILi4ELi64ELi0ELb1EEEvNS1_11PartialArgsE' $B/verify_bench_pipe1 > $O/sass_ring4_pipe1.txt 2>&1
  wc -l $O/sass_ring4_pipe*.txt
else echo "no cuobjdump"; fi
t sass
s=$(date +%s)
MLAV_CUDA_PLUGIN=$B/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=$B/libmlav_test_fault_cuda_plugin.so \
  MLAV_PLUGIN_WORKER=$B/mlaverify-plugin-worker timeout 200 $B/cuda_plugin_tests > $O/plugin_tests.log 2>&1
echo "cuda_plugin_tests rc=$? $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\]' $O/plugin_tests.log | tail -4 | tr '\n' ' ')"
t plugin
gzip -f $O/*.log

#!/bin/bash
# Session 12, call 2: (a) the balanced plan with the wave chunk (f439f4c) against the base
# (fbcacea); (b) the S-split variant of ring 4 (MLAV_S_SPLIT=1): its CUDA tests, racecheck and
# memcheck, its timing and per-phase trace beside the kernel's; (c) the CUDA plugin's lost-context
# tests after the review changes (the loss's text kept, can_implement refusing, the plugin's words).
B=/tmp/b2; rm -rf $B; mkdir -p $B; tar xzf .device/k2/bin.tgz -C $B
O=/tmp/o2; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for v in split new; do for k in mma2 wgmma; do
  [ $v = split ] && [ $k = wgmma ] && continue
  b=$B/cuda_tests; [ $v = split ] && b=$B/cuda_tests_split
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 90 $b > $O/tests_${v}_$k.log 2>&1; rc=$?
  echo "cuda_tests $v $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_${v}_$k.log | head -3 | tr '\n' ' ')"
  grep -E 'Failure|FAILED  \]' $O/tests_${v}_$k.log | head -5
done; done
t tests
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for tool in racecheck memcheck; do
  MLAV_CUDA_KERNEL=mma2 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/cuda_tests_split --gtest_filter="$filter" > $O/san_${tool}_split.log 2>&1
  echo "compute-sanitizer $tool split rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $O/san_${tool}_split.log | head -3 | tr '\n' ' ')"
  t $tool
done
for k in wgmma mma2; do for v in base new; do
  b=$B/verify_bench; [ $v = base ] && b=$B/verify_bench_base
  MLAV_CUDA_KERNEL=$k timeout 60 $b --plan-cost > $O/plancost_${k}_$v.txt 2>&1
  echo "plan-cost $k $v rc=$?: $(grep '^plan-cost' $O/plancost_${k}_$v.txt | awk '{printf "%s ", $3}')"
done; done
t plancost
for round in 1 2; do
  for cfg in base/mma2/balanced new/mma2/balanced base/wgmma/balanced new/wgmma/balanced new/mma2/uniform split/mma2/uniform split/mma2/balanced; do
    IFS=/ read -r v k plan <<<"$cfg"
    b=$B/verify_bench_$v; [ $v = new ] && b=$B/verify_bench
    MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $b > $O/bench_${v}_${k}_${plan}_$round.txt 2>&1
    echo "$v $k $plan r$round rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${v}_${k}_${plan}_$round.txt | awk '{printf "%s ", $3}')"
  done
done
t bench
for v in trace0 splittrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
t trace
s=$(date +%s)
MLAV_CUDA_PLUGIN=$B/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=$B/libmlav_test_fault_cuda_plugin.so \
  MLAV_PLUGIN_WORKER=$B/mlaverify-plugin-worker timeout 100 $B/cuda_plugin_tests \
  --gtest_filter='CudaPluginLost*:CudaPlugin.GuardedFault*' > $O/plugin_lost.log 2>&1
echo "cuda_plugin_tests (lost) rc=$? $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) |first:|later:' $O/plugin_lost.log | tail -6 | tr '\n' ' ')"
# The mutants (m1: can_implement without the loss test, m2: run without its early test, m3: the
# plugin's words dropped): each must fail a death test.
for m in m1 m2 m3; do
  MLAV_CUDA_PLUGIN=$B/libmlaverify_cuda_plugin.so MLAV_FAULT_CUDA_PLUGIN=$B/libmlav_test_fault_cuda_plugin.so \
    timeout 60 $B/cuda_plugin_tests_$m --gtest_filter='CudaPluginLost*' > $O/plugin_lost_$m.log 2>&1
  echo "mutant $m rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/plugin_lost_$m.log | tr '\n' ' ')"
done
t plugin
fn=_ZN9mlaverify4cuda6detail14verify_partialILi4ELi64ELi0ELb1EEEvNS1_11PartialArgsE
cuobjdump -sass -fun $fn $B/verify_bench > $O/sass_ring4.txt 2>&1
cuobjdump -sass -fun $fn $B/verify_bench_split > $O/sass_ring4_split.txt 2>&1
gzip -f $O/*.log $O/sass*.txt
tar czf $OUT/call2.tgz -C $O .
t done

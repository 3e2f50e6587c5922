#!/bin/bash
# Session 12, call 5: the planning kernel's unit stores by a warp per request for batches of at
# most 4 requests and a thread per request otherwise (call 4's warp per request for every batch
# was 2-3x slower at bs 32-64), against f439f4c's (wave); cuda_tests on mma2, wgmma and mma6; the
# README's benchmark (mma2 = the sm_120 configuration, mma6, wgmma, both plans) beside FlashInfer
# fa2, fa3 and fa2 in its sm_120 shape; then ring 4 with the copies issued but no step waiting for
# its own chunk (MLAV_NO_KV_WAIT, timing-only), and memcheck on the balanced and graph tests.
B=/tmp/b5; rm -rf $B; mkdir -p $B; tar xzf .device/k5/bin.tgz -C $B
O=/tmp/o5; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in wgmma mma2; do for v in wave now; do
  b=$B/verify_bench; [ $v = wave ] && b=$B/verify_bench_wave
  MLAV_CUDA_KERNEL=$k timeout 60 $b --plan-cost > $O/plancost_${k}_$v.txt 2>&1
  echo "plan-cost $k $v rc=$?: $(grep '^plan-cost' $O/plancost_${k}_$v.txt | awk '{printf "%s ", $3}')"
done; done
for k in mma2 wgmma mma6; do
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 60 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
done
t tests
for cfg in mma2/balanced mma6/balanced wgmma/balanced mma2/uniform mma6/uniform wgmma/uniform; do
  IFS=/ read -r k plan <<<"$cfg"
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $O/bench_${k}_$plan.txt 2>&1
  echo "$k $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_$plan.txt | awk '{printf "%s ", $3}')"
done
t bench
for fi in fa2 fa3; do
  (cd .kern/peer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 100 bash run.sh) > $O/peer_${fi}_run.txt 2>&1
  echo "== peer $fi rc=$?"; grep -E "^\| (k2|v3|long|mix)" $O/peer_$fi/peer_log.txt | tail -9 | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
done
PEER=.kern/peer OUT=$O/fa2_sm120 timeout 120 bash scripts/peer_fa2_sm120.sh > $O/fa2_sm120_run.txt 2>&1
echo "== fa2 sm120 shape rc=$?"; grep -E "patched" $O/fa2_sm120/peer_log.txt; grep -E "^\| (k2|v3|long|mix)" $O/fa2_sm120/peer_log.txt | tail -9 | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
t peers
tar czf $OUT/call5.tgz -C $O .
for v in trace0 nowait; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_nowaitbench > $O/bench_nowait.txt 2>&1
echo "nowait bench rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_nowait.txt | awk '{printf "%s ", $3}')"
t nowait
tar czf $OUT/call5.tgz -C $O .
MLAV_CUDA_KERNEL=mma2 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/cuda_tests --gtest_filter='*balanced*:*CudaGraph*' > $O/san_memcheck.log 2>&1
echo "compute-sanitizer memcheck mma2 rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/san_memcheck.log | head -3 | tr '\n' ' ')"
t memcheck
gzip -f $O/*.log
tar czf $OUT/call5.tgz -C $O .

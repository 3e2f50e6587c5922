#!/bin/bash
# Session 11, call 1: the CudaBackend review changes (the stale-error test, and the old plan launch
# as its mutant; the death test), cuda_tests, the bench (mma2 and wgmma, balanced), a plan_blocks
# sweep of the mixed batches (the chunk the plan picks), FlashInfer fa2 in its sm_120 shape.
export LD_LIBRARY_PATH=.device/lib; O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
T0=$(date +%s)
for bin in cuda_tests_mutant_stale cuda_tests; do
  MLAV_CUDA_KERNEL=wgmma timeout 60 .device/$bin --gtest_filter='*StaleError*:*LostDeath*' > $O/stale_$bin.log 2>&1
  echo "== $bin rc=$?: $(grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \] Cuda' $O/stale_$bin.log | tr '\n' ' ')"
  grep -m2 -E "Expected|threw|what" $O/stale_$bin.log
done
t stale
for cfg in mma2:* wgmma:*balanced*:CudaLaws.*:*CudaGraph*:*Stale*:*Death*; do
  k=${cfg%%:*}; f=${cfg#*:}
  s=$(date +%s); MLAV_CUDA_KERNEL=$k timeout 150 .device/cuda_tests --gtest_filter="$f" > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
done
t tests
for k in mma2 wgmma; do
  MLAV_CUDA_KERNEL=$k timeout 100 .device/verify_bench > $O/bench_${k}_balanced.txt 2>&1
  echo "== bench $k balanced rc=$?"; grep -E "^(k2|v3|long|mix)|ceilings" $O/bench_${k}_balanced.txt
done
t bench
for cfg in mma2:mix-64x100-4000:132,176,200,220,264,330 wgmma:mix-64x100-4000:132,176,200,220,264,330 wgmma:mix-p0-p1-p4097:132,66,44,33 mma2:mix-p0-p1-p4097:132,66,44; do
  IFS=: read -r k w list <<<"$cfg"
  for sms in ${list//,/ }; do
    MLAV_CUDA_KERNEL=$k MLAV_BENCH_SMS=$sms timeout 30 .device/verify_bench --only $w > $O/sweep_${k}_${w}_$sms.txt 2>&1
    echo "sweep $k $w sms $sms rc=$?: $(grep -E "^$w" $O/sweep_${k}_${w}_$sms.txt)"
  done
done
t sweep
PEER=.kern/peer OUT=$O/fa2_sm120 timeout 200 bash scripts/peer_fa2_sm120.sh > $O/fa2_sm120_run.txt 2>&1
echo "== fa2 sm120 shape rc=$?"; grep -E "patched|^\| (k2|v3|long|mix)" $O/fa2_sm120/peer_log.txt | cut -d'|' -f2,12,13,18 | tail -10
t peer
tar czf $OUT/k23.tgz -C $O .

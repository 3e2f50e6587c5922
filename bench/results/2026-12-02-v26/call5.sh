#!/bin/bash
# Session 14, call 5: choose_plan_pdl (the balanced plan's partial kernel in stream order after
# the planning kernel for the wgmma kernel, as the planning kernel's programmatic dependent for
# the mma.sync ones): cuda_tests on the three kernels; the benchmark, both kernels, both plans,
# two rounds; FlashInfer fa2, fa3 and fa2 in its sm_120 shape on the three mixed batches, the
# same call (the README's mixed table).
B=/tmp/b5; rm -rf $B; mkdir -p $B; tar xzf .device/k5/bin.tgz -C $B
O=$OUT/call5; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for k in wgmma mma2 mma6; do
  MLAV_CUDA_KERNEL=$k timeout 90 $B/cuda_tests > $O/tests_$k.log 2>&1; rc=$?
  echo "cuda_tests $k rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' $O/tests_$k.log | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $O/tests_$k.log | head -5
done
gzip -f $O/*.log
t tests
for round in 1 2; do for cfg in mma2/balanced wgmma/balanced mma2/uniform wgmma/uniform; do
  IFS=/ read -r k plan <<<"$cfg"
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $O/bench_${k}_${plan}_$round.txt 2>&1
  echo "r$round $k $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_${plan}_$round.txt | awk '{printf "%s ", $3}')"
done; done
t bench
W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
for fi in fa3 fa2; do
  (cd .kern/peer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 120 bash run.sh --workloads $W) > $O/peer_${fi}_run.txt 2>&1
  echo "== peer $fi rc=$?"; grep -E "^\| mix" $O/peer_$fi/peer_log.txt | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
  t $fi
done
PEER=.kern/peer OUT=$O/fa2_sm120 timeout 120 bash scripts/peer_fa2_sm120.sh --workloads $W > $O/fa2_sm120_run.txt 2>&1
echo "== fa2 sm120 shape rc=$?"; grep -E "patched" $O/fa2_sm120/peer_log.txt; grep -E "^\| mix" $O/fa2_sm120/peer_log.txt | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
t peers

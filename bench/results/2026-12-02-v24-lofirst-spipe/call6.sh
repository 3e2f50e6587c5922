#!/bin/bash
# Session 12, call 6: the mixed batches beside the peers (call 5's peer copy lacked the mixed
# workloads: bench/results/2026-12-01-v16f-peer-bench-mixed.diff applied to .kern/peer now):
# mma2 (the sm_120 configuration) and wgmma under both plans, FlashInfer fa2, fa3 and fa2 in its
# sm_120 shape on the three mixed batches, one call, call 5's binaries.
B=/tmp/b6; rm -rf $B; mkdir -p $B; tar xzf .device/k5/bin.tgz -C $B
O=/tmp/o6; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for cfg in mma2/balanced wgmma/balanced mma2/uniform wgmma/uniform; do
  IFS=/ read -r k plan <<<"$cfg"
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $O/bench_${k}_$plan.txt 2>&1
  echo "$k $plan rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_$plan.txt | awk '{printf "%s ", $3}')"
done
t bench
W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
for fi in fa2 fa3; do
  (cd .kern/peer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 100 bash run.sh --workloads $W) > $O/peer_${fi}_run.txt 2>&1
  echo "== peer $fi rc=$?"; grep -E "^\| mix" $O/peer_$fi/peer_log.txt | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
  t $fi
done
PEER=.kern/peer OUT=$O/fa2_sm120 timeout 100 bash scripts/peer_fa2_sm120.sh --workloads $W > $O/fa2_sm120_run.txt 2>&1
echo "== fa2 sm120 shape rc=$?"; grep -E "patched" $O/fa2_sm120/peer_log.txt; grep -E "^\| mix" $O/fa2_sm120/peer_log.txt | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
t peers
tar czf $OUT/call6.tgz -C $O .

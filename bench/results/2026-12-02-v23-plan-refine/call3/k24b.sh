#!/bin/bash
# Session 11, call 3: the bench with the refined balanced plan (mma2 = the sm_120 configuration,
# mma6, wgmma; balanced and uniform) beside FlashInfer fa2, fa3 and fa2 in its sm_120 shape.
export LD_LIBRARY_PATH=.device/lib; O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for cfg in mma2/balanced wgmma/balanced mma6/balanced mma2/uniform wgmma/uniform; do
  IFS=/ read -r k plan <<<"$cfg"
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 .device/verify_bench > $O/bench_${k}_$plan.txt 2>&1
  echo "== bench $k $plan rc=$?"; grep -E "^(k2|v3|long|mix)|ceilings \(" $O/bench_${k}_$plan.txt | cut -c1-150
done
t bench
for fi in fa2 fa3; do
  (cd .kern/peer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 150 bash run.sh) > $O/peer_${fi}_run.txt 2>&1
  echo "== peer $fi rc=$?"; grep -E "^\| (k2|v3|long|mix)" $O/peer_$fi/peer_log.txt | tail -9 | cut -d'|' -f2,12,13,18
done
t peers
PEER=.kern/peer OUT=$O/fa2_sm120 timeout 170 bash scripts/peer_fa2_sm120.sh > $O/fa2_sm120_run.txt 2>&1
echo "== fa2 sm120 shape rc=$?"; grep -E "patched|^\| (k2|v3|long|mix)" $O/fa2_sm120/peer_log.txt | cut -d'|' -f2,12,13,18 | tail -10
t fa2_sm120
tar czf $OUT/k24b.tgz -C $O .

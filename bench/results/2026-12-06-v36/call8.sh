#!/bin/bash
# v36 call 8: the wgmma kernel (Hopper) with the softmax's 2^x as ex2.approx.ftz, as the sm_120
# kernels have it since v35 (-DMLAV_WGMMA_EX2=1, wgex2): its cuda_tests; two interleaved rounds
# against the default (exp2f) under both plans; then FlashInfer fa3 (the wgmma kernel's peer)
# and fa2 (the sm_120 kernel's) on the nine, the same call (the mixed batches' requirement:
# at least as fast as FlashInfer's kernel of the same class).
#   bash bench/results/2026-12-06-v36/build8.sh, then carry [".device/k8", ".device/mixpeer"]
source scripts/device_call_lib.sh 8
run_tests wgmma cuda_tests_wgex2
t tests
for r in 1 2; do
  run_bench wg_bal_$r wgmma balanced
  run_bench wgex2_bal_$r wgmma balanced verify_bench_wgex2
  run_bench wg_uni_$r wgmma uniform
  run_bench wgex2_uni_$r wgmma uniform verify_bench_wgex2
  MLAV_MMA2_RING=4 run_bench r4_bal_$r mma2 balanced
done
t bench
W=k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx
W=$W,mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
for fi in fa3 fa2; do
  (cd .device/mixpeer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 200 bash run.sh \
    --workloads $W) > "$O/peer_${fi}_run.txt" 2>&1
  echo "peer $fi rc=$?"
  grep -E '^\| (k2|v3|long|mix)' "$O/peer_$fi/peer_log.txt" | tail -9
  t $fi
done
finish

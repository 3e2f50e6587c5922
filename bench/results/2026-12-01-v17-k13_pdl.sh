#!/bin/bash
# MLAV_PLAN_PDL=1 (the partial kernel as the planning kernel's programmatic dependent) vs 0 (stream order), alternated twice, per kernel.
B=.kern/bin13
for i in 1 2; do for k in wgmma mma2; do for pdl in 1 0; do
  MLAV_CUDA_KERNEL=$k MLAV_PLAN_PDL=$pdl timeout 60 $B/verify_bench > /tmp/pdl_${k}_${pdl}_$i.txt 2>&1
  echo "$k balanced pdl=$pdl $i: $(grep -E '^(k2|v3|long|mix)' /tmp/pdl_${k}_${pdl}_$i.txt | awk '{printf "%s ", $3}')"
done; done; done
for k in wgmma mma2; do MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench > /tmp/u_$k.txt 2>&1
  echo "$k uniform: $(grep -E '^(k2|v3|long|mix)' /tmp/u_$k.txt | awk '{printf "%s ", $3}')"; done

#!/bin/bash
# A/B: the balanced and uniform plans alternated, three rounds (mma2) and two (wgmma).
B=.kern/bin13
for i in 1 2 3; do for plan in balanced uniform; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $OUT/ab_mma2_${plan}_$i.txt 2>&1
  echo "mma2 $plan $i: $(grep -E '^(k2|v3|long|mix)' $OUT/ab_mma2_${plan}_$i.txt | awk '{printf "%s ", $3}')"
done; done
for i in 1 2; do for plan in balanced uniform; do
  MLAV_CUDA_KERNEL=wgmma MLAV_BENCH_PLAN=$plan timeout 60 $B/verify_bench > $OUT/ab_wgmma_${plan}_$i.txt 2>&1
  echo "wgmma $plan $i: $(grep -E '^(k2|v3|long|mix)' $OUT/ab_wgmma_${plan}_$i.txt | awk '{printf "%s ", $3}')"
done; done

#!/bin/bash
# Session 18, call 7: verify_bench's MLAV_BENCH_RUN_LEN parse after the review (strtoll, the whole
# value): "64abc", "0" and "" refused with exit 2 and one line; 64 accepted.
source scripts/device_call_lib.sh 7
for v in 64abc 0 ""; do
  MLAV_BENCH_RUN_LEN=$v timeout 30 $B/verify_bench --only v3-tp8-chain4 > $O/run_$v.txt 2>&1
  echo "MLAV_BENCH_RUN_LEN='$v' rc=$?: $(grep MLAV_BENCH_RUN_LEN $O/run_$v.txt | head -1)"
done
MLAV_BENCH_RUN_LEN=64 MLAV_CUDA_KERNEL=mma2 timeout 30 $B/verify_bench --only v3-tp8-chain4 > $O/run_64.txt 2>&1
echo "MLAV_BENCH_RUN_LEN=64 rc=$?: $(grep -E 'prefix slots|^v3-tp8-chain4' $O/run_64.txt | tr '\n' ' ')"
finish

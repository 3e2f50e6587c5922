#!/bin/bash
# v32 call 1: the KV chunk copies in whole 32-byte sectors (MLAV_KV_WHOLE_SECTORS=1: a key's
# threads copy units t and t + 4 of a 128-byte chunk row, t and t + 2 of the ws S ring's 64-byte
# one, so each warp-wide cp.async reads whole sectors; before, units 2t and 2t + 1: each copy
# takes half of every sector it touches and the next copy the other half). The same bits.
# Builds: verify_bench (scripts/device_build.sh at this commit: ring 4 and the ws default form
# as they were), r4w (ring 4, whole sectors), wsw (the ws default form, whole sectors), ws30
# (v30's form from v31's code: -DMLAV_WS_VKEYS=64 -DMLAV_WS_SLAT=0 -DMLAV_WS_HANDOFF=0) and
# ws30w (the same, whole sectors); each variant by
#   LINK=tests/cuda/cuda_tests UNIT=verify_partial_{s2|ws} scripts/variant_bench.sh NAME \
#     cuda/verify_partial_{s2|ws}.cu "FLAGS"
# cuda_tests on the three whole-sector builds (the default build's SASS is 17a520c's parent's),
# then two interleaved rounds of the benchmark (uniform plan); the bench's
# new gather-ceiling line times the two copy patterns alone.
source scripts/device_call_lib.sh 1
MLAV_MMA2_RING=4 run_tests mma2 cuda_tests_r4w
for v in wsw ws30w; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
t tests
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=4 run_bench r4w_$r mma2 uniform verify_bench_r4w
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsw_$r mma2 uniform verify_bench_wsw
  if [ $r = 1 ]; then
    for v in ws30 ws30w; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
  fi
done
grep "gather ceiling" $O/bench_r4_1.txt
t bench
finish

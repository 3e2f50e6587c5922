#!/bin/bash
# Session 18, call 3: is the TMA path paced by its bytes in flight? Call 2's 64-row boxes (17
# requests per tile) left the tile at v25's ~12K cycles, waiting ~2.65K per tile for chunks, with
# the math outside the waits ~750 cycles shorter than the kernel's (no LDGSTS beside the
# ldmatrix). Here the same loaders with 1 and 2 more chunks in flight (MLAV_RING_EXTRA, timing-
# only, buffers over Q's last rows): boxes at run length 64, and v25's row requests
# (MLAV_TMA_KV=2, 1,088 per tile) at the SPEC layout (run length 1). Two rounds, uniform, mma2.
source scripts/device_call_lib.sh 3
for round in 1 2; do
  MLAV_BENCH_RUN_LEN=64 run_bench base64_$round mma2 uniform
  for v in tmabox tmabox5 tmabox6; do
    MLAV_BENCH_RUN_LEN=64 run_bench ${v}_64_$round mma2 uniform verify_bench_$v
  done
  run_bench base1_$round mma2 uniform
  for v in tmarow tmarow6; do run_bench ${v}_1_$round mma2 uniform verify_bench_$v; done
done
t bench
MLAV_BENCH_RUN_LEN=64 run_trace tmabox6trace
t trace
finish

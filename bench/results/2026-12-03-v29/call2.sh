#!/bin/bash
# Session 18, call 2: what the TMA copy engine costs per byte once its requests are few. v25 timed
# one TMA request per key row and chunk (1,088 per tile: ~6.9 cycles each on a ~12K-cycle floor);
# call 1 showed that more chunks in flight do not speed the cp.async stream. MLAV_TMA_KV=6
# (timing-only; correct only where a tile's 64 slots are one ascending run) issues each chunk as
# one 64-row box from thread 0: 17 requests per tile. The pool is paged by 64 here
# (MLAV_BENCH_RUN_LEN=64, every tile one run). Two interleaved rounds, uniform plan, mma2: the
# kernel at run length 64 and 1 (the SPEC layout), the box loader at 64; then per-block traces.
source scripts/device_call_lib.sh 2
for round in 1 2; do
  MLAV_BENCH_RUN_LEN=64 run_bench base64_$round mma2 uniform
  MLAV_BENCH_RUN_LEN=64 run_bench tmabox64_$round mma2 uniform verify_bench_tmabox
  run_bench base1_$round mma2 uniform
done
t bench
MLAV_BENCH_RUN_LEN=64 run_trace mmatrace
MLAV_BENCH_RUN_LEN=64 run_trace tmaboxtrace
t trace
grep -h "prefix slots" $O/bench_base64_1.txt $O/bench_base1_1.txt
finish

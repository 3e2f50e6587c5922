#!/bin/bash
# Session 18, call 1: is the sm_120 kernel's chunk stream paced by the bytes it has in flight?
# Ring 4 holds 3 chunks (24 KB) in flight; v25 read the bulk-copy floor as in-flight-bound and
# v28's copy warps fell behind with the same 24 KB. MLAV_RING_EXTRA=k (timing-only, garbage
# results) runs ring 4's kernel with 4 + k buffers in the same bytes, the extra ones over Q's last
# rows. Two interleaved rounds, uniform plan, mma2: the kernel, ring 5, ring 6 (16 bytes of spill
# on sm_90); the tensor-rate emulation (MLAV_MMA_REPEAT=2, v20c) with and without ring 5; then the
# per-block traces (chunk waits per tile) of the kernel, ring 5 and ring 6; then cuda_tests on the
# default build (the source moved; its PTX is byte-identical to 799cd62's, checked here).
source scripts/device_call_lib.sh 1
for round in 1 2; do
  run_bench base_$round mma2 uniform
  for v in ring5 ring6; do run_bench ${v}_$round mma2 uniform verify_bench_$v; done
done
for v in rep2 ring5rep2; do run_bench $v mma2 uniform verify_bench_$v; done
t bench
for v in mmatrace ring5trace ring6trace; do run_trace $v; done
t trace
run_tests mma2
t tests
finish

#!/bin/bash
# Session 17, call 4: does v24's S split (32 x 32 warp tiles in S, a third fewer operand reads)
# pay once the copy warpgroup issues the copies (v28)? It gained 13% of S without any copies and
# nothing with the math warps copying (v27 call 3). cuda_tests on the combination, then two
# interleaved rounds of the kernel, the copy warps (math_sync now barrier 5), the S split and
# both together, uniform plan, mma2.
source scripts/device_call_lib.sh 4
run_tests mma2 cuda_tests_cwsplit
t tests
for round in 1 2; do
  run_bench base_$round mma2 uniform
  for v in cw split cwsplit; do run_bench ${v}_$round mma2 uniform verify_bench_$v; done
done
t bench
finish

#!/bin/bash
# v31 call 2: the ws kernel with the row hand-over (PV warps take the next tile's KV rows from
# the S warps) and Q's last two latent chunks from L1, the V ring 4 deep in the same 101,376
# bytes (the build: MLAV_WS_QL1=2, S 128 / PV 184 registers, no spills on sm_90a or sm_120a),
# beside: wsh (hand-over only, V ring 2), wsv4 (V ring 4 with Q all in smem: 109,568 bytes,
# timing-only), wsq4 (4 chunks from L1, V ring 6), ws0 (v30's final form), ring 4.
# Tests first (cuda_tests, the CUDA property suite, memcheck on the sanitizer set), then two
# rounds of the benchmark, uniform plan.
# Built on the workstation (f3bb909's code with the slot read one step ahead) with
#   LINK=tests/cuda/cuda_tests UNIT=verify_partial_ws scripts/variant_bench.sh NAME \
#     cuda/verify_partial_ws.cu "FLAGS":
#   wsh   -DMLAV_WS_QL1=0 -DMLAV_WS_SREGS=136
#   wsv4  -DMLAV_WS_QL1=0 -DMLAV_WS_SREGS=136 -DMLAV_WS_VSTAGES=4
#   wsq4  -DMLAV_WS_QL1=4
#   ws    scripts/device_build.sh's build (the file's default then: QL1=2, S 128)
#   ws0   .device/verify_bench as staged at 5ee5c59 (v30's final form)
source scripts/device_call_lib.sh 2
MLAV_MMA2_RING=ws run_tests mma2
for v in wsq4 wsh; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 240 $B/props_tests \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
echo "props_tests mma2/ws rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | head -3 | tr '\n' ' ')"
grep -E "FAILED .* at case" $O/props_ws.log | head -3
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*:*Poison*:*poison*'
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 compute-sanitizer --tool memcheck \
  --error-exitcode 9 $B/cuda_tests --gtest_filter="$filter" > $O/san_memcheck_ws.log 2>&1
echo "memcheck ws rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED  \] [0-9]' $O/san_memcheck_ws.log | head -3 | tr '\n' ' ')"
t tests
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws0_$r mma2 uniform verify_bench_ws0
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in wsh wsv4 wsq4; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
finish

#!/bin/bash
# v31 call 3: the V ring in half-tile chunks (MLAV_WS_VKEYS=32: 32 keys x 32 columns, 2 KB, so
# the same 8 KB keep 3 chunks / 6 KB in flight instead of 1 / 4 KB), and the S warps' slot read
# one tile ahead again (call 2's read one step ahead cost wsh 1-5%). Builds (all with the row
# hand-over): wsh2 (V ring 2 x 4 KB), wsk32 (4 x 2 KB, in the budget), wsk32s (the same with
# the S warps' latent rows read from the hand-over table, MLAV_WS_SLAT=1: no spills on sm_120a),
# wsk32v6 (6 x 2 KB, 4 KB past it, timing-only), wsk32q2 (Q's last two chunks from L1,
# 8 x 2 KB); beside ws0 (v30's final form) and ring 4. cuda_tests on wsk32s and wsk32 and the
# CUDA property suite on wsk32s, one round of the benchmark, uniform plan, then the property suite (trimmed to the device time left
# after failed starts: wsh2 and wsk32q2 were staged but not run).
# Built on the workstation (aa56adb, the slot read at enter already) with
#   LINK=tests/cuda/cuda_tests UNIT=verify_partial_ws scripts/variant_bench.sh NAME \
#     cuda/verify_partial_ws.cu "FLAGS"   (wsk32s also with LINK+=tests/props/props_tests):
#   wsk32   -DMLAV_WS_QL1=0 -DMLAV_WS_SREGS=136 -DMLAV_WS_VKEYS=32
#   wsk32s  -DMLAV_WS_QL1=0 -DMLAV_WS_VKEYS=32 -DMLAV_WS_SLAT=1 -DMLAV_WS_SREGS=136  (the default
#           from 57f6a31 on)
#   wsk32v6 -DMLAV_WS_QL1=0 -DMLAV_WS_SREGS=136 -DMLAV_WS_VKEYS=32 -DMLAV_WS_VSTAGES=6
#   ws0     .device/verify_bench as staged at 5ee5c59 (v30's final form)
source scripts/device_call_lib.sh 3
for v in wsk32s wsk32; do MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_$v; done
t tests
for r in 1; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws0_$r mma2 uniform verify_bench_ws0
  for v in wsk32s wsk32 wsk32v6; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 $B/props_tests_wsk32s \
  --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_wsk32s.log 2>&1
echo "props_tests_wsk32s rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_wsk32s.log | head -3 | tr '\n' ' ')"
grep -E "FAILED .* at case" $O/props_wsk32s.log | head -3
t props
finish

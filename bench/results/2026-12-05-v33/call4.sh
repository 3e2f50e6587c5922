#!/bin/bash
# v33 call 4: the ws kernel's two group hand-overs as mbarriers (wsmb: -DMLAV_WS_MBAR=1; the
# default build keeps the named barriers, whose bar.arrive side racecheck cannot follow: v32's
# call 2 saw 652 errors there). cuda_tests and compute-sanitizer racecheck and memcheck of wsmb on
# the sanitizer set of scripts/device_run.sh, then two interleaved rounds (uniform plan) of ring 4,
# the ws default and wsmb.
source scripts/device_call_lib.sh 8
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsmb
t tests
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for tool in racecheck memcheck; do
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 compute-sanitizer --tool $tool \
    --error-exitcode 9 $B/cuda_tests_wsmb --gtest_filter="$filter" > $O/san_${tool}_wsmb.log 2>&1
  echo "$tool wsmb rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_${tool}_wsmb.log | head -3 | tr '\n' ' ')"
  grep -m3 -E 'Race reported|Error: Race|hazard' $O/san_${tool}_wsmb.log
  t $tool
done
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsmb_$r mma2 uniform verify_bench_wsmb
done
t bench
finish

#!/bin/bash
# v33 call 7: MLAV_WS_MBAR=1 as committed after the review (wsmbm: the PV warps wait through
# verify_kernel.cuh's mbar_wait; call 4's build, 4f3d60d, waited through a C++ loop around one
# try_wait, 30 of the sm_90a object's SASS lines apart): cuda_tests, racecheck on the sanitizer
# set, two interleaved rounds beside the ws default.
source scripts/device_call_lib.sh 11
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsmbm
t tests
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 150 compute-sanitizer --tool racecheck \
  --error-exitcode 9 $B/cuda_tests_wsmbm --gtest_filter="$filter" > $O/san_racecheck_wsmbm.log 2>&1
echo "racecheck wsmbm rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_racecheck_wsmbm.log | head -3 | tr '\n' ' ')"
t racecheck
for r in 1 2; do
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsmbm_$r mma2 uniform verify_bench_wsmbm
done
t bench
finish

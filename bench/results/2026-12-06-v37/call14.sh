#!/bin/bash
# v37 call 14: the ws experiment's new default (v30's form, tile 0's slot after setmaxnreg,
# one-row-tile batches routed to ring 4): cuda_tests on ws (routed, and MLAV_WS_ROUTE=0 so that
# every shape runs ws), ring 4 and wgmma; memcheck and racecheck on ws (ROUTE=0); the property
# suite on ws with a fresh MLAV_SEED; then ring 4, ws (routed and not), mma6 and wgmma, uniform
# plan, two rounds; FlashInfer fa2 and, time allowing, fa3 on the six.
#   carry [".device/k14", ".device/peer"]
source scripts/device_call_lib.sh 14
main() {
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  seed=$(( $(date +%s) % 1000000007 ))
  ( MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 MLAV_SEED=$seed timeout 200 \
      $B/props_tests --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_ws.log 2>&1
    echo "props ws MLAV_SEED=$seed rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_ws.log | tr '\n' ' ')" ) &
  MLAV_MMA2_RING=ws run_tests mma2
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_tests mma2 cuda_tests
  mv $O/tests_mma2.log $O/tests_ws_route0.log
  MLAV_MMA2_RING=4 run_tests mma2
  run_tests wgmma
  for tool in memcheck racecheck; do
    MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 timeout 300 compute-sanitizer \
      --tool $tool --error-exitcode 9 $B/cuda_tests --gtest_filter="$filter" > $O/$tool.log 2>&1
    echo "$tool ws rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/$tool.log | tr '\n' ' ')"
  done
  wait
  t tests
  for r in 1 2; do
    MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
    MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
    MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_bench ws0_$r mma2 uniform
    run_bench mma6_$r mma6 uniform
    run_bench wgmma_$r wgmma uniform
  done
  t bench
  run_peer 170
  t fa2
  if [ $(( $(date +%s) - T0 )) -lt 380 ]; then
    (cd .device/peer && OUT=$O/peer3 SKIP_SELFTEST=1 NO_TRITON=1 FI_BACKEND=fa3 timeout 170 bash run.sh \
      --workloads k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx) \
      > $O/peer3_run.txt 2>&1
    echo "fa3 rc=$?"; grep -E '^\| (k2|v3|long)' $O/peer3/peer_log.txt | tail -6
    t fa3
  fi
}
main 2>&1 | tee "$O/summary.txt"
finish

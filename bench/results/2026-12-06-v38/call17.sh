#!/bin/bash
# v38 call 17, the README table's second half and the ws experiment's mbarrier form: FlashInfer
# fa2 in the shape an sm_120 part gives it (scripts/peer_fa2_sm120.sh, 101,376 bytes per SM) on
# the nine; then the mbarrier form (-DMLAV_WS_MBAR=1, v37's build15.sh: wsM1, and wsM2 under
# v20c's emulation at K = 2) -- its cuda_tests and racecheck (MLAV_WS_ROUTE=0, so every shape
# runs ws) and its time beside the named-barrier form and ring 4, at K = 1 (this commit's
# verify_bench, also the table's second round of ring 4 and ws) and K = 2.
#   carry [".device/k16", ".device/k15", ".device/mixpeer"] (build16.sh's and v37's build15.sh's)
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh
O=/tmp/o17
call_n=17
rm -rf $O && mkdir -p $O
tar xzf .device/k15/bin.tgz -C $B --exclude verify_bench
main() {
  PEER=.device/mixpeer OUT=$O/peer_sm120 PEER_MAIN=0 timeout 230 scripts/peer_fa2_sm120.sh \
    --workloads $W > $O/peer_sm120_run.txt 2>&1
  echo "fa2 sm120 shape rc=$?"
  grep -E '^\| (k2|v3|long|mix)' $O/peer_sm120/peer_log.txt | tail -9
  t fa2_sm120
  pack
  filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
  MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 run_tests mma2 cuda_tests_wsM1
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_WS_ROUTE=0 timeout 120 compute-sanitizer \
    --tool racecheck --error-exitcode 9 $B/cuda_tests_wsM1 --gtest_filter="$filter" > $O/racecheck_wsM.log 2>&1
  echo "racecheck wsM rc=$?: $(grep -E 'RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/racecheck_wsM.log | tr '\n' ' ')"
  t tests
  pack
  export MLAV_WS_ROUTE=0
  MLAV_MMA2_RING=4 run_bench r4_uni_2 mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws0_uni_2 mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsM1 mma2 uniform verify_bench_wsM1
  MLAV_MMA2_RING=4 run_bench r4_K2 mma2 uniform verify_bench_r4_2
  MLAV_MMA2_RING=ws run_bench wsBf_K2 mma2 uniform verify_bench_wsBf2
  MLAV_MMA2_RING=ws run_bench wsM_K2 mma2 uniform verify_bench_wsM2
  t bench
}
main 2>&1 | tee "$O/summary.txt"
finish

#!/bin/bash
# v33 call 2: the S warps' row read before the step's barrier (MLAV_WS_ROW_EARLY=1, now the ws
# default; wsold = 0, v31/v32's form) and the PV warps' copy from the tile's first row past the
# split (wsr0: -DMLAV_WS_PV_ROW0=1 on top). cuda_tests on both new builds, memcheck of wsr0,
# two interleaved rounds (uniform plan) beside ring 4, ncu of the new default on tree32, and
# FlashInfer fa2 (228 KB shape; Triton and PyTorch in its first step) on the six.
source scripts/device_call_lib.sh 6
MLAV_MMA2_RING=ws run_tests mma2
MLAV_MMA2_RING=ws run_tests mma2 cuda_tests_wsr0
t tests
f='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*'
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $B/cuda_tests_wsr0 --gtest_filter="$f" > $O/memcheck_wsr0.log 2>&1
echo "memcheck wsr0 rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $O/memcheck_wsr0.log | head -3 | tr '\n' ' ')"
t memcheck
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench wsold_$r mma2 uniform verify_bench_wsold
  MLAV_MMA2_RING=ws run_bench wsr0_$r mma2 uniform verify_bench_wsr0
done
t bench
MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_BENCH_PLAN=uniform timeout 170 ncu --clock-control none \
  --kernel-name regex:verify_partial --launch-count 1 --set full --import-source no \
  -o /tmp/prof_ws -f "$B/verify_bench" --only v3-tp8-tree32 > "$O/ncu_ws_log.txt" 2>&1
echo "ncu rc=$?"
ncu -i /tmp/prof_ws.ncu-rep --page details > "$O/ncu_ws_details.txt" 2>&1
ncu -i /tmp/prof_ws.ncu-rep --page source --csv --print-source sass > "$O/ncu_ws_sass.csv" 2>/dev/null
gzip -f "$O/ncu_ws_sass.csv"
grep -E 'Duration|Issue Slots Busy' "$O/ncu_ws_details.txt" | head -4
t ncu
(cd .device/peer && OUT=$O/peer SKIP_SELFTEST=1 FI_BACKEND=fa2 timeout 260 bash run.sh \
  --workloads k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx) > $O/peer_run.txt 2>&1
echo "peer rc=$?"; grep -E '^\| (k2|v3|long)' $O/peer/peer_log.txt | tail -6
t peer
finish

#!/bin/bash
# v33 call 1: where the ws kernel's S steps lose their time to the copies. ncu (--set full, one
# tree32 launch, clocks left alone) of the ws default form and of its copy-free timing variant
# (MLAV_WS_NO_COPY=1, wsnc); then one round of ring 4 and ws (uniform plan) and FlashInfer fa2
# (228 KB shape) on the six, on the same card (v32's call 3, which could not start).
source scripts/device_call_lib.sh 5
prof() {
  local tag=$1 bin=$2
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=ws MLAV_BENCH_PLAN=uniform timeout 170 ncu --clock-control none \
    --kernel-name regex:verify_partial --launch-count 1 --set full --import-source no \
    -o /tmp/prof_$tag -f "$B/$bin" --only v3-tp8-tree32 > "$O/ncu_${tag}_log.txt" 2>&1
  echo "ncu $tag rc=$?"
  ncu -i /tmp/prof_$tag.ncu-rep --page details > "$O/ncu_${tag}_details.txt" 2>&1
  ncu -i /tmp/prof_$tag.ncu-rep --page source --csv --print-source sass > "$O/ncu_${tag}_sass.csv" 2>/dev/null
  python3 "$B/sass_top.py" "$O/ncu_${tag}_sass.csv" > "$O/ncu_${tag}_top.txt" 2>&1
  gzip -f "$O/ncu_${tag}_sass.csv"
  grep -E 'Duration|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|L1/TEX Hit|Mem Pipes Busy|Shared Memory|L2 Hit|Bank' \
    "$O/ncu_${tag}_details.txt" | head -24
  sed -n 2,40p "$O/ncu_${tag}_top.txt" | grep -v columns | head -36
}
prof ws verify_bench
t ncu_ws
prof wsnc verify_bench_wsnc
t ncu_wsnc
MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws_1 mma2 uniform
t bench
(cd .device/peer && OUT=$O/peer SKIP_SELFTEST=1 FI_BACKEND=fa2 timeout 200 bash run.sh --peers torch \
  --workloads k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx) 2>&1 | tail -14
t peer
finish

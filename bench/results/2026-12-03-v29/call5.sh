#!/bin/bash
# Session 18, call 5: the wgmma kernel and FlashInfer fa3 on the three mixed batches in one call
# (call 4 measured wgmma's mix-64x100-4000 at 124.0 us against v26's fa3 figure of 125, from
# another call). The kernel twice (balanced plan), fa3 once between (the peer copy of
# /work/shared/peer with the mixed workloads, Triton left out of its step 1 as in v26).
source scripts/device_call_lib.sh 5
run_bench wgmma_1 wgmma balanced
W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097
(cd .kern/peer && OUT="$O/peer_fa3" SKIP_SELFTEST=1 FI_BACKEND=fa3 timeout 150 bash run.sh --workloads $W) > $O/peer_fa3_run.txt 2>&1
echo "== peer fa3 rc=$?"; grep -E "^\| mix" $O/peer_fa3/peer_log.txt | cut -d'|' -f2,12,18 | tr '\n' ' '; echo
t fa3
run_bench wgmma_2 wgmma balanced
run_bench mma2_1 mma2 balanced
t bench
finish

#!/bin/bash
# v39 call 2, for an H200 (the issue's machine; v38's table ran on an H100): the README's table in
# one call. One round of ring 4 and ws (routed) under both plans, mma6 and wgmma, then FlashInfer
# fa2 (228 KB shape; PyTorch and the ceilings in its first step), fa2 in the sm_120 shape and fa3
# on the nine; afterwards scripts/readme_table.py over this call's folder prints the table.
#   bash bench/results/2026-12-07-v39/build1.sh, then carry [".device/k1", ".device/mixpeer"]
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh  # peer, peer_all, W (the nine), bench_round
O=/tmp/o2
call_n=2
rm -rf $O $B && mkdir -p $O $B
tar xzf .device/k1/bin.tgz -C $B
main() {
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 ||
    echo "not an H200: the table is for the issue's machine"
  bench_round 1
  pack
  peer_all
}
main 2>&1 | tee "$O/summary.txt"
finish

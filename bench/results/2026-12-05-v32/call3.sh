#!/bin/bash
# v32 call 3: FlashInfer fa2 (its 228 KB shape, the mma.sync peer) beside ring 4, the ws default
# form and wsw on the same H100 (v31 and v32 measured on H100s without a peer in the call): one
# round of our benchmark (uniform plan), then the peer on the six (PyTorch instead of Triton in its
# first step, to fit the device time left). The peer: .device/peer, a copy of /work/shared/peer.
source scripts/device_call_lib.sh 3
MLAV_MMA2_RING=4 run_bench r4_1 mma2 uniform
MLAV_MMA2_RING=ws run_bench ws_1 mma2 uniform
MLAV_MMA2_RING=ws run_bench wsw_1 mma2 uniform verify_bench_wsw
t bench
(cd .device/peer && OUT=$O/peer SKIP_SELFTEST=1 FI_BACKEND=fa2 timeout 240 bash run.sh --peers torch \
  --workloads k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx) 2>&1 | tail -14
t peer
finish

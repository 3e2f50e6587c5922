#!/bin/bash
# v33 call 6: where the S warps load Q's k_pe fragments from global memory (MLAV_WS_QR_AT, never
# measured: default 13; call 2's profile put ~4% of the S warps' samples on those LDG, waiting for
# the MIO queue). qr11 / qr14 load them at step 11 / 14, qrm1 (-1) each k_pe chunk's at its own
# step. Two interleaved rounds (uniform plan) beside the ws default.
source scripts/device_call_lib.sh 10
for r in 1 2; do
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in qr11 qr14 qrm1; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
finish

#!/bin/bash
# v30 call 6: where the ws kernel's tile goes (MLAV_WS_TRACE builds: per-group cycles per tile,
# chunk waits, softmax, the P hand-over waits; the trace builds spill 120-228 bytes, so their
# absolute numbers are approximate), for the budget's rings (3 + 3) and rings of 6 (timing-only,
# past the budget); and the same 6 buffers divided 4 + 2 and 2 + 4 between the S and V rings.
# Uniform plan, one round.
source scripts/device_call_lib.sh 6
MLAV_MMA2_RING=ws run_bench ws mma2 uniform
MLAV_MMA2_RING=ws run_bench s4v2 mma2 uniform verify_bench_s4v2
MLAV_MMA2_RING=ws run_bench s2v4 mma2 uniform verify_bench_s2v4
for v in wstr ws6tr; do
  MLAV_MMA2_RING=ws MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 "$B/verify_bench_$v" > "$O/$v.txt" 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' "$O/$v.txt" | awk '{printf "%s ", $3}')"
  grep WSTRACE "$O/$v.txt" | head -9
done
t bench
finish

#!/bin/bash
# v31 call 1: what each chunk stream costs the ws kernel (timing-only MLAV_WS_NO_COPY=1 / 2 / 3:
# no copies, no V copies, no S-ring copies; garbage results) beside ws and ring 4, two rounds,
# uniform plan; and where the sm_120a object spills (its SASS around each STL / LDL).
source scripts/device_call_lib.sh 1
for r in 1 2; do
  MLAV_MMA2_RING=4 run_bench r4_$r mma2 uniform
  MLAV_MMA2_RING=ws run_bench ws_$r mma2 uniform
  for v in wsnoc wsnov wsnok; do MLAV_MMA2_RING=ws run_bench ${v}_$r mma2 uniform verify_bench_$v; done
done
t bench
/usr/local/cuda/bin/cuobjdump -sass -arch sm_120a "$B/verify_partial_ws.o" > "$O/ws_sm120a.sass" 2>&1
/usr/local/cuda/bin/cuobjdump -sass -arch sm_90a "$B/verify_partial_ws.o" > "$O/ws_sm90a.sass" 2>&1
for a in sm_120a sm_90a; do
  echo "$a: $(grep -cE 'STL|LDL' "$O/ws_$a.sass") local accesses"
  grep -nE 'STL|LDL' "$O/ws_$a.sass" | head -20
done
gzip -f "$O"/*.sass
finish

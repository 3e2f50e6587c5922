#!/bin/bash
# Session 13, call 3: the copy engine's cost per request or per byte: timing-only bulk-copy
# loaders (garbage results) with 128-byte requests (call 2's MLAV_TMA_KV=3, again), 256 (=4) and
# 512 bytes (=5), the same bytes per chunk; per-phase traces.
B=/tmp/b3; rm -rf $B; mkdir -p $B; tar xzf .device/k3/bin.tgz -C $B
O=/tmp/o3; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for v in bulktrace bulk4trace bulk5trace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
tar czf $OUT/call3.tgz -C $O .

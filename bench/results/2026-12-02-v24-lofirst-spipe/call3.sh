#!/bin/bash
# Session 12, call 3: ring 4's loop without the KV stream (MLAV_NO_KV_LOAD, timing-only: the
# chunk copies are not issued), per-phase traces of the kernel and the S-split variant with and
# without it, and the end-to-end time without it.
B=/tmp/b3; rm -rf $B; mkdir -p $B; tar xzf .device/k3/bin.tgz -C $B
O=/tmp/o3; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for v in trace0 noload splittrace splitnoload; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"; grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
for round in 1 2; do for v in new noloadbench; do
  b=$B/verify_bench_$v; [ $v = new ] && b=$B/verify_bench
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 60 $b > $O/bench_${v}_$round.txt 2>&1
  echo "$v r$round rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${v}_$round.txt | awk '{printf "%s ", $3}')"
done; done
tar czf $OUT/call3.tgz -C $O .

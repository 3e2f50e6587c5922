#!/bin/bash
# Session 14, call 4: where the planning kernel's cost on the balanced plan goes, three
# interleaved rounds, both kernels: the benchmark as it is (PDL on and off: MLAV_PLAN_PDL),
# verify_bench_plantrivial (the first planner of a graph plans, the other rotations' planners are
# launched but return at once: the chain's third kernel without its work) and
# verify_bench_planonce (one planner per graph: the chain without the third kernel).
B=/tmp/b4; rm -rf $B; mkdir -p $B; tar xzf .device/k4/bin.tgz -C $B
O=/tmp/o4; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
T0=$(date +%s); t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
for round in 1 2 3; do for k in wgmma mma2; do
  for v in pdl nopdl trivial trivial_nopdl once uniform; do
    b=$B/verify_bench; plan=balanced; pdl=1
    case $v in trivial*) b=$B/verify_bench_plantrivial ;; once) b=$B/verify_bench_planonce ;; uniform) plan=uniform ;; esac
    case $v in *nopdl) pdl=0 ;; esac
    MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan MLAV_PLAN_PDL=$pdl timeout 60 $b > $O/bench_${k}_${v}_$round.txt 2>&1
    echo "r$round $k $v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/bench_${k}_${v}_$round.txt | awk '{printf "%s ", $3}')"
  done
done; done
t bench
tar czf $OUT/call4.tgz -C $O .

#!/bin/bash
# NOT RUN: the session's device time ran out before it (cuda/NOTES.md v26, Next). Repack
# .device/k8 from a build with the two variants (scripts/variant_bench.sh, UNIT=verify_plan, the
# diffs beside this script) before running it.
# Session 14, call 8: call 4's one-planner-per-graph variant had its partial kernels launched as
# programmatic dependents of the previous rotation's merge (MLAV_PLAN_PDL=1 then); here in
# stream order too, beside the trivial planner in stream order (call 4's binaries, wgmma, two
# rounds): whether the empty kernel's 2-9 us were the kernel or the dependent launch.
source scripts/device_call_lib.sh 8
for round in 1 2; do
  for v in plantrivial planonce; do
    export MLAV_PLAN_PDL=0; run_bench wgmma_${v}_nopdl_$round wgmma balanced verify_bench_$v
  done
  export MLAV_PLAN_PDL=1; run_bench wgmma_planonce_pdl_$round wgmma balanced verify_bench_planonce
done
t bench
finish

#!/bin/bash
# Session 16, call 2: NOTES v27's question. The default mma2 kernel beside two timing builds of
# it (MLAV_KV_CA=1: every chunk copy through L1, the same bits; MLAV_NO_KV_LOAD=2: V chunks not
# copied, garbage) and MLAV_NO_KV_LOAD=1 (no chunk copies: v24's floor), each also as a per-block
# trace (MLAV_MMA_TRACE); kvca once more with MLAV_SMEM_CARVEOUT=100 (28 KB of L1, the card's);
# cuda_tests linked against kvca (it must change no bits). Then v26's call 8 (never run): the
# one-plan-per-graph and trivial-planner variants in stream order, wgmma, two rounds (their
# sources: plan_once.diff, plan_trivial.diff beside this script, on 0280ca7's launch_kernel).
source scripts/device_call_lib.sh 2
run_tests mma2
run_tests mma2 cuda_tests_kvca
t tests
for round in 1 2; do
  run_bench base_$round mma2 uniform
  run_bench kvca_$round mma2 uniform verify_bench_kvca
  MLAV_SMEM_CARVEOUT=100 run_bench kvca_c100_$round mma2 uniform verify_bench_kvca
  MLAV_SMEM_CARVEOUT=100 run_bench base_c100_$round mma2 uniform
  run_bench novload_$round mma2 uniform verify_bench_novload
done
t bench
for v in trace0 kvcatrace novloadtrace noloadtrace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"
  grep MMATRACE $O/$v.txt | head -6 | sed 's/blocks with.*cycles per tile//'
done
MLAV_SMEM_CARVEOUT=100 MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_kvcatrace > $O/kvcatrace_c100.txt 2>&1
echo "kvcatrace c100 rc=$?"; grep MMATRACE $O/kvcatrace_c100.txt | head -6 | sed 's/blocks with.*cycles per tile//'
t traces
for round in 1 2; do
  for v in plantrivial planonce; do
    export MLAV_PLAN_PDL=0; run_bench wgmma_${v}_nopdl_$round wgmma balanced verify_bench_$v
  done
  export MLAV_PLAN_PDL=1; run_bench wgmma_planonce_pdl_$round wgmma balanced verify_bench_planonce
  unset MLAV_PLAN_PDL; run_bench wgmma_base_$round wgmma balanced
done
t plan
finish

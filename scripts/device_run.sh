#!/bin/bash
# One device call: CUDA tests (both kernel variants), compute-sanitizer (memcheck + racecheck) on
# the small cases, and the benchmark. Binaries are built on the dev machine and carried in .device/
# (cuda/NOTES.md: "How to run on the device").
# usage: scripts/device_run.sh [tests|sanitize|bench|compare|sweep]...
#        (default: tests sanitize bench). MLAV_CUDA_KERNEL picks the partial kernel on Hopper:
#        wgmma (default), mma6 (mma.sync, 6 stages), mma2 (mma.sync, the sm_120-sized variant).
set -u
BIN=${BIN:-.device}
OUT=${OUT:-/tmp/mlav_out}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitize bench)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      # Every partial kernel on the same device: wgmma (default on Hopper), the 6-stage mma.sync
      # kernel, and the sm_120-sized mma.sync kernel (2 stages x 64 columns).
      # The wgmma kernel runs under both draft plans (MLAV_DRAFT_PLAN; the default picks one
      # per shape, so each plan is forced once to test it on every case), and the folded plan
      # with both merges (MLAV_MERGE: the cluster merge by default where it fits, the kernel).
      for config in wgmma/folded/ wgmma/folded/kernel wgmma/unfolded/ mma6// mma2//; do
        IFS=/ read -r kernel plan merge <<<"$config"
        name=${config%/}
        name=${name%/}
        log="$OUT/tests_${name//\//_}.log"
        MLAV_CUDA_KERNEL=$kernel MLAV_DRAFT_PLAN=$plan MLAV_MERGE=$merge "$BIN/cuda_tests" >"$log" 2>&1
        rc=$?
        grep -E "^\[ratio\]|FAILED|Failure|PASSED|SKIPPED \]" "$log" | head -40
        echo "cuda_tests (kernel=$kernel plan=${plan:-default} merge=${merge:-default}) rc=$rc"
        [ $rc -ne 0 ] && status=1
      done ;;
    sanitize)
      # Small cases only: the sanitizers slow kernels by ~100x.
      filter='CudaLaws.*:CudaGraph.*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*'
      # Twice: the default plan (unfolded for most small cases) and the folded plan, which runs
      # the cluster merge (distributed shared memory) where it applies.
      for plan in default folded; do
        for tool in memcheck racecheck; do
          log="$OUT/sanitize_${tool}_$plan.log"
          MLAV_DRAFT_PLAN=${plan#default} compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BIN/cuda_tests" --gtest_filter="$filter" >"$log" 2>&1
          rc=$?
          grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$log" | head -8
          echo "compute-sanitizer $tool (plan $plan) rc=$rc"
          [ $rc -ne 0 ] && status=1
        done
      done
      # racecheck does not model one-sided bar.arrive -> bar.sync handshakes (the wgmma kernel
      # uses mbarriers for that reason). The probe runs such a handshake alone (and a
      # bar.sync-only twin) under racecheck, so the tool's behaviour is on record in every run.
      if [ -x "$BIN/racecheck_probe" ]; then
        for v in arrive sync; do
          compute-sanitizer --tool racecheck "$BIN/racecheck_probe" --variant $v 2>&1 |
            grep -E "racecheck_probe|RACECHECK SUMMARY" | sed "s/^/probe $v: /"
        done
      fi ;;
    bench)
      "$BIN/verify_bench" 2>&1 | tee "$OUT/bench.txt" ;;
    compare)
      # The mma.sync kernels in the same call, for the ladder in cuda/NOTES.md.
      for kernel in mma6 mma2; do
        MLAV_CUDA_KERNEL=$kernel "$BIN/verify_bench" 2>&1 | tee "$OUT/bench_$kernel.txt"
      done
      # The wgmma kernel with the merge kernel instead of the cluster merge.
      MLAV_MERGE=kernel "$BIN/verify_bench" 2>&1 | tee "$OUT/bench_merge_kernel.txt" ;;
    sweep)
      "$BIN/verify_bench" --sweep 2>&1 | tee "$OUT/bench_sweep.txt" ;;
  esac
done
exit $status

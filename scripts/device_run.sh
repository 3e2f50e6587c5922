#!/bin/bash
# One device call: CUDA tests (both warp layouts x both pipeline variants), compute-sanitizer
# (memcheck + racecheck) on the small cases, and the benchmark. Binaries are built on the dev
# machine and carried in .device/ (cuda/NOTES.md: "How to run on the device").
# usage: scripts/device_run.sh [tests|sanitize|bench|compare|sweep]...
#   (default: tests sanitize bench compare)
# env: WARPS_LIST (warp layouts the tests run, default "8 16"), SAN_WARPS (layout the sanitizers
# run, default: the compiled-in default), COMPARE_ROUNDS (v6/v7 alternations, default 2).
set -u
BIN=${BIN:-.device}
OUT=${OUT:-/tmp/mlav_out}
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitize bench compare)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      # Each warp layout (MLAV_CUDA_WARPS: 8 = v6, 16 = v7) with the default pipeline, then with
      # the sm_120-sized one (2 stages x 64 columns) on the same device.
      for warps in ${WARPS_LIST:-8 16}; do
        for stages in default 2; do
          env_set=(MLAV_CUDA_WARPS=$warps)
          [ "$stages" != default ] && env_set+=(MLAV_CUDA_STAGES=$stages)
          log="$OUT/tests_w${warps}_s${stages}.log"
          env "${env_set[@]}" "$BIN/cuda_tests" >"$log" 2>&1
          rc=$?
          grep -E "^\[ratio\]|FAILED|Failure|PASSED|SKIPPED \]" "$log" | head -20
          echo "cuda_tests (warps=$warps stages=$stages) rc=$rc"
          [ $rc -ne 0 ] && status=1
        done
      done ;;
    sanitize)
      # Small cases only: the sanitizers slow kernels by ~100x.
      filter='CudaLaws.*:CudaGraph.*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*'
      san_env=()
      [ -n "${SAN_WARPS:-}" ] && san_env=(MLAV_CUDA_WARPS=$SAN_WARPS)
      for tool in memcheck racecheck; do
        env "${san_env[@]}" compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/cuda_tests" \
          --gtest_filter="$filter" >"$OUT/sanitize_$tool.log" 2>&1
        rc=$?
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize_$tool.log" | head -8
        echo "compute-sanitizer $tool (warps=${SAN_WARPS:-default}) rc=$rc"
        [ $rc -ne 0 ] && status=1
      done ;;
    bench)
      "$BIN/verify_bench" 2>&1 | tee "$OUT/bench.txt" ;;
    compare)
      # v6 (8 warps) and v7 (16 warps) alternating in one call (cuda/NOTES.md: same-call rule).
      for round in $(seq 1 "${COMPARE_ROUNDS:-2}"); do
        for warps in 8 16; do
          echo "== compare round $round, MLAV_CUDA_WARPS=$warps"
          MLAV_CUDA_WARPS=$warps "$BIN/verify_bench" 2>&1 | tee -a "$OUT/compare.txt" | tail -6
        done
      done ;;
    sweep)
      "$BIN/verify_bench" --sweep 2>&1 | tee "$OUT/bench_sweep.txt" ;;
  esac
done
exit $status

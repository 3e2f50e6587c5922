#!/bin/bash
# One device call: CUDA tests (both warp layouts x both pipeline variants), compute-sanitizer
# (memcheck + racecheck) on the small cases, and the benchmark. Binaries are built on the dev
# machine and carried in .device/ (cuda/NOTES.md: "How to run on the device").
# usage: scripts/device_run.sh [tests|sanitize|bench|compare|sweep]...
#   (default: tests sanitize bench compare)
# env: TEST_CONFIGS (warps:stages:cols the tests run), SAN_WARPS (layout the sanitizers run,
# default: the compiled-in default), COMPARE_CONFIGS (warps:cols), COMPARE_ROUNDS (default 2).
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
      # Each configuration warps:stages:cols (MLAV_CUDA_WARPS 8 = v6, 16 = v7; stages "default"
      # = the deep Hopper pipeline, 2 = the sm_120-sized one; cols 128 = v7's 128-column chunks).
      for cfg in ${TEST_CONFIGS:-8:default:64 8:2:64 16:default:64 16:2:64 16:default:128}; do
        IFS=: read -r warps stages cols <<<"$cfg"
        env_set=(MLAV_CUDA_WARPS=$warps MLAV_CUDA_COLS=$cols)
        [ "$stages" != default ] && env_set+=(MLAV_CUDA_STAGES=$stages)
        log="$OUT/tests_w${warps}_s${stages}_c${cols}.log"
        env "${env_set[@]}" "$BIN/cuda_tests" >"$log" 2>&1
        rc=$?
        grep -E "FAILED|Failure|PASSED|SKIPPED \]" "$log" | head -20
        echo "cuda_tests (warps=$warps stages=$stages cols=$cols) rc=$rc"
        [ $rc -ne 0 ] && status=1
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
      # Kernel variants warps:cols alternating in one call (cuda/NOTES.md: same-call rule).
      for round in $(seq 1 "${COMPARE_ROUNDS:-2}"); do
        for cfg in ${COMPARE_CONFIGS:-8:64 16:64 16:128}; do
          IFS=: read -r warps cols <<<"$cfg"
          echo "== compare round $round, MLAV_CUDA_WARPS=$warps MLAV_CUDA_COLS=$cols"
          MLAV_CUDA_WARPS=$warps MLAV_CUDA_COLS=$cols "$BIN/verify_bench" 2>&1 |
            tee -a "$OUT/compare.txt" | tail -6
        done
      done ;;
    sweep)
      "$BIN/verify_bench" --sweep 2>&1 | tee "$OUT/bench_sweep.txt" ;;
  esac
done
exit $status

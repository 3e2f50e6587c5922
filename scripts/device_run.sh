#!/bin/bash
# One device call: CUDA tests, compute-sanitizer (memcheck + racecheck) on the small cases, and
# the benchmark. Binaries are built on the dev machine and carried in .device/ (see cuda/NOTES.md).
# usage: scripts/device_run.sh [tests|sanitize|bench|sweep]...  (default: tests sanitize bench)
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
      "$BIN/cuda_tests" >"$OUT/tests.log" 2>&1
      rc=$?
      grep -E "^\[ratio\]|FAILED|Failure|error|PASSED|SKIPPED \]" "$OUT/tests.log" | head -60
      echo "cuda_tests rc=$rc"
      [ $rc -ne 0 ] && status=1 ;;
    sanitize)
      # Small cases only: the sanitizers slow kernels by ~100x.
      filter='CudaLaws.*:CudaGraph.*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*'
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/cuda_tests" --gtest_filter="$filter" \
          >"$OUT/sanitize_$tool.log" 2>&1
        rc=$?
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize_$tool.log" | head -8
        echo "compute-sanitizer $tool rc=$rc"
        [ $rc -ne 0 ] && status=1
      done ;;
    bench)
      "$BIN/verify_bench" 2>&1 | tee "$OUT/bench.txt" ;;
    sweep)
      "$BIN/verify_bench" --sweep 2>&1 | tee "$OUT/bench_sweep.txt" ;;
  esac
done
exit $status

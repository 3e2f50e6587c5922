#!/bin/bash
# One device call: CUDA tests (both kernel variants), compute-sanitizer (memcheck + racecheck) on
# the small cases, and the benchmark. Binaries are built on the dev machine and carried in .device/
# (cuda/NOTES.md: "How to run on the device").
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
      # Default variant, then the sm_120-sized one (2 stages x 64 columns) on the same device.
      for stages in default 2; do
        if [ "$stages" = default ]; then env_set=(); else env_set=(MLAV_CUDA_STAGES=$stages); fi
        env "${env_set[@]}" "$BIN/cuda_tests" >"$OUT/tests_$stages.log" 2>&1
        rc=$?
        grep -E "^\[ratio\]|FAILED|Failure|PASSED|SKIPPED \]" "$OUT/tests_$stages.log" | head -40
        echo "cuda_tests (stages=$stages) rc=$rc"
        [ $rc -ne 0 ] && status=1
      done ;;
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

#!/bin/bash
# v32 call 2: correctness of the sm_120 configuration at this commit (default builds, the same
# SASS as 17a520c's parent): the CUDA property suite with a fresh seed (1796474339, 60 cases) on
# ring 4 (the sm_120 default) and on the ws kernel's default form; compute-sanitizer racecheck on
# both and memcheck on ws (v31 ran none of racecheck on the ws default form), on the sanitizer set
# of scripts/device_run.sh, and the racecheck probe (the tool's bar.arrive blind spot on record).
source scripts/device_call_lib.sh 2
for ring in 4 ws; do
  MLAV_SEED=1796474339 MLAV_CASES=60 MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$ring timeout 150 $B/props_tests \
    --gtest_filter='Backends/PropertySuite.*/cuda' > $O/props_$ring.log 2>&1
  echo "props_tests mma2/$ring seed 1796474339 rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $O/props_$ring.log | head -3 | tr '\n' ' ')"
  grep -E "FAILED .* at case" $O/props_$ring.log | head -3
done
t props
filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
for cfg in 4/racecheck ws/racecheck ws/memcheck; do
  IFS=/ read -r ring tool <<<"$cfg"
  MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$ring timeout 150 compute-sanitizer --tool $tool \
    --error-exitcode 9 $B/cuda_tests --gtest_filter="$filter" > $O/san_${tool}_$ring.log 2>&1
  echo "$tool mma2/$ring rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' $O/san_${tool}_$ring.log | head -3 | tr '\n' ' ')"
done
for v in arrive sync; do
  compute-sanitizer --tool racecheck $B/racecheck_probe --variant $v 2>&1 |
    grep -E "racecheck_probe|RACECHECK SUMMARY" | sed "s/^/probe $v: /"
done
t sanitize
finish

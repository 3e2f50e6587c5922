#!/usr/bin/env bash
# The probable bound's full measurement (not in CI): for each numerical mutant (dropped_key_p256,
# o_scale_1pct, one_wrong_element) under three declarations (the CPU's, a foreign kernel's
# defaults, the defaults without lse), SEEDS campaigns of CASES cases: campaigns caught, and per
# case how many the mutant touched / made visible and how many were caught; then the correct
# backends' margins (worst error / probable bound) over the same seeds.
# Usage: scripts/power_sweep.sh [SEEDS=20] [CASES=100]; MLAV_SEED picks the first seed.
#   MLAV_POWER_EVERY_CASE=0 stops each campaign at its first catch (much faster);
#   MLAV_POWER_MUTANTS=0 / MLAV_POWER_CORRECT=0 skip either half; MLAV_POWER_VERBOSE=1 prints
#   every visible fault that was missed; MLAV_POWER_ONLY=<mutant> measures one mutant.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tests/props/power_tests ] || scripts/build.sh power_tests
MLAV_POWER_SWEEP=1 MLAV_POWER_SEEDS="${1:-20}" MLAV_POWER_CASES="${2:-100}" \
  build/tests/props/power_tests --gtest_filter=Power.Sweep

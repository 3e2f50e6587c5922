#!/usr/bin/env bash
# Every test: install what is missing, build everything, run ctest (fixed seed, then a short run
# with a fresh printed seed), then the model, CPU, scenario and property-suite tests again under
# ASan + UBSan, then the loaders' libFuzzer harnesses (scripts/fuzz.sh, MLAV_FUZZ_SECONDS each).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Seconds since the start, printed at each stage's start, so a slow CI run says where it went.
at() { echo "[test.sh: $(( $(date +%s) - start )) s]"; }
scripts/deps.sh
scripts/venv.sh
at
scripts/build.sh
at

echo "== ctest (fixed seed) =="
(cd build && MLAV_SEED=${MLAV_SEED:-20261129} ctest --output-on-failure -j 2 --timeout 900)

if [ -x build/tests/cuda/cuda_tests ]; then
  echo "== GPU tests: what ran and why any skipped =="
  build/tests/cuda/cuda_tests --gtest_brief=1 2>&1 | grep -v "^Running main" | sort | uniq -c | sort -rn | head -8
fi

fresh=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
at
echo "== property suite, fresh seed MLAV_SEED=$fresh (rerun with MLAV_SEED=$fresh scripts/test.sh) =="
# 20 cases per campaign (the fixed-seed run above has the full count): 388 s of CI at 40 cases.
(cd build && MLAV_SEED=$fresh MLAV_CASES=${MLAV_FRESH_CASES:-20} ctest --output-on-failure -j 2 -L props \
  --timeout 900)

at
echo "== model, cpu, scenario and property tests under AddressSanitizer and UndefinedBehaviorSanitizer =="
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 -g1 (ASan's own advice; line tables are enough for its reports' file:line): on 2 cores this
# build took 461 s at RelWithDebInfo's -O2 -g and 216 s so, and its two ctest runs below 84 + 241
# s and 98 + 245 s (2026-12-07, a clean clone of 44dec69): 227 s less in all.
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLAV_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DMLAV_MODEL_CPU_ONLY=ON "${launcher[@]}"
fi
cmake --build build-asan -j "$(nproc)"
(cd build-asan && MLAV_SEED=${MLAV_SEED:-20261129} MLAV_CASES=20 ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 2 --timeout 1200 -LE props)
# The property suite on 3 cases per campaign: ~10x slower under the sanitizers. Left to the plain
# run: the mutation catalog (Mutants.*, 5 min here), the suite's statistical power (Power.*,
# 220 s of CPU here) and the campaign's sharding (CampaignShard.*, 162 s), each the same suite
# code and backends that CampaignFindsNothing runs here, on mutants, many seeds or shards.
(cd build-asan && MLAV_SEED=${MLAV_SEED:-20261129} MLAV_CASES=3 ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 2 --timeout 1200 -L props \
  -E '^(Mutants|Power|CampaignShard)[.]')
at
echo "== the loaders under libFuzzer (clang, ASan + UBSan), ${MLAV_FUZZ_SECONDS:-60} s per fuzzer =="
scripts/fuzz.sh "${MLAV_FUZZ_SECONDS:-60}"
echo "test.sh: all stages passed in $(( $(date +%s) - start )) s"

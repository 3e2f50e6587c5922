#!/usr/bin/env bash
# Builds the loaders' libFuzzer harnesses (fuzz/, clang with ASan + UBSan, into build-fuzz/) and
# runs each for a fixed time, one per core at a time (MLAV_JOBS, default nproc): scenario_fuzzer
# (scenarios::parse_scenario) seeded from scenarios/cases/*.json, dump_fuzzer (the server-dump
# loader, replay and diagnose) seeded from fuzz/seeds/dump (slimmed from scenarios/dumps/*.safetensors by fuzz/make_dump_seeds.py), and
# options_fuzzer (the C API's options reader, capi/c_options.h) seeded from fuzz/seeds/options,
# report_fuzzer (the fuzz report reader and merge, cli/json_io.h) seeded from fuzz/seeds/report
# and sim_fuzzer (the simulation scenario reader, sim/sim_scenario.h) from fuzz/seeds/sim,
# each also from its fuzz/regressions/{scenario,dump,options,report,sim}/ inputs. Before fuzzing, every regression input
# and the full shipped dumps run once through their harness.
# Usage: scripts/fuzz.sh [seconds per fuzzer, default 60]
# Prints executions and crashes per fuzzer; exits non-zero on any crash, with the input saved
# under fuzz-failures/<fuzzer>/ (reproduce: build-fuzz/fuzz/<fuzzer> fuzz-failures/<fuzzer>/crash-*;
# then add it to fuzz/regressions/{scenario,dump,options,report,sim}/ with the fix).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
jobs=${MLAV_JOBS:-$(nproc)}
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$cxx" ]; then
  echo "fuzz.sh: no clang++ (scripts/deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DMLAV_MODEL_CPU_ONLY=ON -DMLAV_FUZZ=ON "${launcher[@]}"
fi
cmake --build build-fuzz -j "$jobs" --target scenario_fuzzer dump_fuzzer options_fuzzer report_fuzzer \
  sim_fuzzer

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
summary=()

# The whole path once for the shipped dumps at full size (the fuzzer skips replay above a size).
echo "== dump_fuzzer on the shipped dumps, full size =="
if ! MLAV_FUZZ_FULL=1 build-fuzz/fuzz/dump_fuzzer scenarios/dumps/*.safetensors >"$work/full.log" 2>&1; then
  tail -40 "$work/full.log"
  echo "fuzz.sh: a shipped dump crashes dump_fuzzer" >&2
  failed=1
fi

# One fuzzer: its regression inputs, then the timed run. Runs in the background beside others
# (one per core, below), so it prints into $work/$name.out and records a failure as
# $work/$name.failed and its summary line as $work/$name.summary, read after the waits.
run_fuzzer() {  # name, max_len, seed files...
  local name=$1 max_len=$2
  shift 2
  exec >"$work/$name.out" 2>&1
  local failed=0
  local corpus="$work/$name" out="fuzz-failures/$name" log="$work/$name.log"
  mkdir -p "$corpus" "$out"
  cp "$@" "$corpus/"
  local regressions=(fuzz/regressions/"${name%_fuzzer}"/*)
  if [ -e "${regressions[0]}" ]; then
    echo "== $name: ${#regressions[@]} regression inputs =="
    if ! build-fuzz/fuzz/"$name" "${regressions[@]}" >"$work/$name.regress.log" 2>&1; then
      grep -v "^    #" "$work/$name.regress.log" | tail -40
      echo "fuzz.sh: $name crashes on a regression input" >&2
      echo "$name: a regression input crashes" >"$work/$name.summary"
      touch "$work/$name.failed"
      return
    fi
    cp "${regressions[@]}" "$corpus/"
  fi
  echo "== $name: ${seconds} s from $(ls "$corpus" | wc -l) seeds =="
  local rc=0 stamp="$work/$name.stamp"
  touch "$stamp"
  build-fuzz/fuzz/"$name" "$corpus" -dict="fuzz/${name%_fuzzer}.dict" -max_len="$max_len" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$out/" >"$log" 2>&1 || rc=$?
  local execs crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' -o -name 'slow-unit-*' \) -newer "$stamp" | wc -l)
  if ((rc != 0)) && ((crashes == 0)); then crashes=1; fi
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$log" | tail -2 || true
  local line="$name: ${execs:-?} executions in ${seconds} s, $crashes crashes"
  if ((crashes > 0)); then
    grep -v '^#' "$log" | tail -60
    line+=" (exit $rc; input saved: $(find "$out" -maxdepth 1 -type f -newer "$stamp" | tr '\n' ' '))"
    failed=1
  fi
  echo "$line"
  echo "$line" >"$work/$name.summary"
  if ((failed)); then touch "$work/$name.failed"; fi
}

# The five run $jobs at a time (libFuzzer is single-threaded: one core each, the same
# executions per fuzzer as one after the other, in a fraction of the wall time).
fuzzers=(scenario_fuzzer dump_fuzzer options_fuzzer report_fuzzer sim_fuzzer)
started=0
for name in "${fuzzers[@]}"; do
  case "$name" in
    scenario_fuzzer) run_fuzzer scenario_fuzzer 8192 scenarios/cases/*.json & ;;
    dump_fuzzer) run_fuzzer dump_fuzzer 131072 fuzz/seeds/dump/*.safetensors & ;;
    options_fuzzer) run_fuzzer options_fuzzer 4096 fuzz/seeds/options/*.bin & ;;
    report_fuzzer) run_fuzzer report_fuzzer 65536 fuzz/seeds/report/* & ;;
    sim_fuzzer) run_fuzzer sim_fuzzer 16384 fuzz/seeds/sim/* & ;;
  esac
  started=$((started + 1))
  if ((started >= jobs)); then
    wait -n || true
    started=$((started - 1))
  fi
done
wait || true
for name in "${fuzzers[@]}"; do
  cat "$work/$name.out"
  if [ -f "$work/$name.summary" ]; then
    summary+=("$(cat "$work/$name.summary")")
  else
    summary+=("$name: did not finish")
    failed=1
  fi
  if [ -f "$work/$name.failed" ]; then failed=1; fi
done

echo "== fuzz.sh summary =="
printf '%s\n' "${summary[@]}"
exit "$failed"

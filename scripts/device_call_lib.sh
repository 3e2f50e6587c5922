#!/bin/bash
# Sourced by a device call's script (bench/results/DATE-*/callN.sh) for what every call repeats:
#   source scripts/device_call_lib.sh N
# unpacks .device/kN/bin.tgz (the staged binaries, packed on this machine) into $B, makes the
# call's output folder $O, prints the GPU's clocks and defines:
#   t LABEL                 seconds since the start, after a step
#   run_tests K [BIN [FILTER]]  cuda_tests (or BIN) under MLAV_CUDA_KERNEL=K: its summary line and
#                           the first failures; the log in $O/tests_K[_BIN].log
#   run_props K [SECONDS]   the property suite on the CUDA backend (props_tests from the
#                           staged binaries) under MLAV_CUDA_KERNEL=K with a fresh MLAV_SEED
#                           (the time): its summary line; the log in $O/props_K.log
#   run_bench TAG K PLAN [BIN]  verify_bench (or BIN) under MLAV_CUDA_KERNEL=K and
#                           MLAV_BENCH_PLAN=PLAN (more settings from the caller's environment):
#                           the nine workloads' medians on one line, the output in $O/bench_TAG.txt
#   run_trace V [K [PLAN]]  verify_bench_V (an MLAV_MMA_TRACE build) under kernel K and PLAN
#                           (mma2, uniform): the medians, then each workload's MMATRACE line
#                           without its block counts; the output in $O/V.txt
#   run_ncu TAG K BIN WORKLOAD  one launch of verify_partial under ncu --set full (BIN under
#                           MLAV_CUDA_KERNEL=K, uniform plan): $O/ncu_TAG_details.txt, the source
#                           page as $O/ncu_TAG_sass.csv.gz, and the duration / issue-slot lines
#   run_peer [SECONDS]      FlashInfer fa2 (228 KB shape; Triton and PyTorch in its first step) on
#                           the six from .device/peer (carry it): the six lines of its table,
#                           the output in $O/peer
#   run_san TOOL TAG BIN [RING [SECONDS]]  compute-sanitizer TOOL (memcheck, racecheck) over
#                           BIN's small CUDA cases (SAN_FILTER) under MLAV_CUDA_KERNEL=$K (mma2,
#                           the sm_120-sized kernel, unless K is set) with MLAV_MMA2_RING=RING
#                           (the default ring when empty): its summary lines, the commonest
#                           reports and the first kernel frames; the log in $O/TOOL_TAG.log
#   run_peer_sm120 WORKLOADS [SECONDS]  FlashInfer fa2 in the shape an sm_120 part gives it
#                           (scripts/peer_fa2_sm120.sh over .device/mixpeer, carry it; its rc 1 is
#                           the skipped PyTorch step): its table's lines, the output in $O/peer_sm120
#   run_peers_mixed B..     FlashInfer backend B (fa3, fa2) on the mixed three, each then packed;
#                           needs call16.sh's peer (CALL16_LIB=1 source
#                           bench/results/2026-12-06-v38/call16.sh) and .device/mixpeer
#   sass OBJ                an object's SASS instructions without their addresses (cuobjdump)
#   sass_diff TAG A B       compares two objects' SASS: instruction lines of each, lines differing
#   pack                    packs $O into $OUT/callN.tgz as it stands (after a step)
#   finish                  gzips the logs and packs $O into $OUT/callN.tgz (the device tool
#                           brings back a bounded number of files)
call_n=$1
B=/tmp/b$call_n
O=/tmp/o$call_n
rm -rf "$B" "$O"
mkdir -p "$B" "$O"
tar xzf ".device/k$call_n/bin.tgz" -C "$B"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv,noheader
T0=$(date +%s)
t() { echo "[$1: $(( $(date +%s) - T0 )) s]"; }
run_tests() {
  local k=$1 bin=${2:-cuda_tests} filter=${3:-*}
  local log=$O/tests_$k$([ "$bin" = cuda_tests ] || echo "_$bin").log
  MLAV_CUDA_KERNEL=$k timeout 120 "$B/$bin" --gtest_filter="$filter" > "$log" 2>&1
  echo "$bin $k rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$log" | head -3 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$log" | head -5
}
run_props() {
  local k=$1 seed=$(( $(date +%s) % 1000000007 ))
  MLAV_CUDA_KERNEL=$k MLAV_SEED=$seed timeout "${2:-200}" "$B/props_tests" \
    --gtest_filter='Backends/PropertySuite.*/cuda' > "$O/props_$k.log" 2>&1
  echo "props $k MLAV_SEED=$seed rc=$?:" \
    "$(grep -E '^\[  (PASSED|FAILED) |cases in' "$O/props_$k.log" | tr '\n' ' ')"
}
run_bench() {
  local tag=$1 k=$2 plan=$3 bin=${4:-verify_bench}
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 60 "$B/$bin" > "$O/bench_$tag.txt" 2>&1
  echo "$tag rc=$?: $(grep -E '^(k2|v3|long|mix)' "$O/bench_$tag.txt" | awk '{printf "%s ", $3}')"
}
run_trace() {
  local v=$1 k=${2:-mma2} plan=${3:-uniform}
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 90 "$B/verify_bench_$v" > "$O/$v.txt" 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' "$O/$v.txt" | awk '{printf "%s ", $3}')"
  grep MMATRACE "$O/$v.txt" | head -6 | sed 's/blocks with.*cycles per tile//'
}
run_ncu() {
  local tag=$1 k=$2 bin=$3 w=$4
  MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=uniform timeout 90 ncu --clock-control none \
    --kernel-name regex:verify_partial --launch-count 1 --set full --import-source no \
    -o "/tmp/prof_$tag" -f "$B/$bin" --only "$w" > "$O/ncu_${tag}_log.txt" 2>&1
  echo "ncu $tag rc=$?"
  ncu -i "/tmp/prof_$tag.ncu-rep" --page details > "$O/ncu_${tag}_details.txt" 2>&1
  ncu -i "/tmp/prof_$tag.ncu-rep" --page source --csv --print-source sass \
    > "$O/ncu_${tag}_sass.csv" 2>/dev/null
  gzip -f "$O/ncu_${tag}_sass.csv"
  grep -E 'Duration|Issue Slots Busy' "$O/ncu_${tag}_details.txt" | head -4
}
run_peer() {
  (cd .device/peer && OUT=$O/peer SKIP_SELFTEST=1 FI_BACKEND=fa2 timeout "${1:-200}" bash run.sh \
    --workloads k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx) \
    > "$O/peer_run.txt" 2>&1
  echo "peer rc=$?"
  grep -E '^\| (k2|v3|long)' "$O/peer/peer_log.txt" | tail -6
}
SAN_FILTER='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
run_san() {
  local tool=$1 tag=$2 bin=$3 ring=${4:-} log=$O/$1_$2.log
  env MLAV_CUDA_KERNEL="${K:-mma2}" ${ring:+MLAV_MMA2_RING=$ring} timeout "${5:-130}" \
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$B/$bin" --gtest_filter="$SAN_FILTER" \
    > "$log" 2>&1
  echo "$tool $tag rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -E '^========= (Error|Race|Warning)' "$log" | sort | uniq -c | sort -rn | head -3
  grep -m3 -E '^=========     at .*verify_partial' "$log"
}
run_peers_mixed() {
  local b
  for b in "$@"; do
    W=mix-long-short,mix-64x100-4000,mix-p0-p1-p4097 peer "$b"
    pack
  done
}
run_peer_sm120() {
  PEER=.device/mixpeer OUT=$O/peer_sm120 PEER_MAIN=0 timeout "${2:-150}" scripts/peer_fa2_sm120.sh \
    --workloads "$1" > "$O/peer_sm120_run.txt" 2>&1
  echo "fa2 sm120 shape rc=$? (1: its skipped PyTorch step)"
  grep -E '^\| (k2|v3|long|mix)' "$O/peer_sm120/peer_log.txt" | tail -9
}
sass() {
  /usr/local/cuda/bin/cuobjdump -sass "$1" | grep -E '^\s+/\*[0-9a-f]+\*/' |
    sed -e 's#/\*[0-9a-f]*\*/##g'
}
sass_diff() {
  sass "$2" > "$O/$1_a.sass"
  sass "$3" > "$O/$1_b.sass"
  echo "$1: sass lines $(wc -l < "$O/$1_a.sass") and $(wc -l < "$O/$1_b.sass"), differing lines:" \
    "$(diff "$O/$1_a.sass" "$O/$1_b.sass" | grep -c '^[<>]')"
  rm "$O/$1_a.sass" "$O/$1_b.sass"
}
# What is done so far, packed where the device tool picks it up (finish does it last; a call can
# pack after each step, so one cut off at its limit still returns the steps before).
pack() { tar czf "$OUT/call$call_n.tgz" -C "$O" .; }
finish() {
  gzip -f "$O"/*.log 2>/dev/null
  pack
}

#!/bin/bash
# One device call: CUDA tests (both kernel variants), compute-sanitizer (memcheck + racecheck) on
# the small cases, and the benchmark. Binaries are built on the dev machine and carried in .device/
# (cuda/NOTES.md: "How to run on the device").
# usage: scripts/device_run.sh [tests|tests120|sanitize|sanitize120|bench|compare|ab120|l1sweep|peer|sweep]...
#        (default: tests sanitize bench). MLAV_CUDA_KERNEL picks the partial kernel on Hopper:
#        wgmma (default), mma6 (mma.sync, 6 stages), mma2 (mma.sync, the sm_120-sized variant;
#        MLAV_MMA2_L1 its L1 prefetch distance in chunks, 0 the plain v6 kernel).
#        tests120 / sanitize120: the sm_120 kernel alone (mma2, default and plain), for short calls.
#        peer: FlashInfer fa2 (mma.sync, the sm_120 class) from PEER (a copy of /work/shared/peer).
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
    tests|tests120)
      # Every partial kernel on the same device: wgmma (default on Hopper), the 6-stage mma.sync
      # kernel, and the sm_120-sized mma.sync kernel (2 stages x 64 columns).
      # The wgmma kernel runs under both draft plans (MLAV_DRAFT_PLAN; the default picks one
      # per shape, so each plan is forced once to test it on every case), and the folded plan
      # with both merges (MLAV_MERGE: the cluster merge by default where it fits, the kernel).
      # mma2 runs with its default pipeline and as the plain v6 kernel (ring 2, no L1 staging);
      # for tests120, TESTS120 may replace the list (kernel/plan/merge/ring/l1 each).
      configs=(wgmma/folded// wgmma/folded/kernel/ wgmma/unfolded// mma6/// mma2/// mma2///2/0
               mma2///3/0 mma2///3/2 mma2///4/0)
      [ "$step" = tests120 ] && configs=(mma2/// mma2///2/0)
      [ "$step" = tests120 ] && [ -n "${TESTS120:-}" ] && configs=(${TESTS120})
      for config in "${configs[@]}"; do
        IFS=/ read -r kernel plan merge ring l1 <<<"$config"
        name=$(echo "$config" | sed -e 's#/*$##' -e 's#/#_#g')
        log="$OUT/tests_$name.log"
        MLAV_CUDA_KERNEL=$kernel MLAV_DRAFT_PLAN=$plan MLAV_MERGE=$merge MLAV_MMA2_RING=$ring \
          MLAV_MMA2_L1=$l1 timeout 300 "$BIN/cuda_tests" >"$log" 2>&1
        rc=$?
        grep -E "^\[ratio\]|FAILED|Failure|PASSED|SKIPPED \]" "$log" | head -40
        echo "cuda_tests (kernel=$kernel plan=${plan:-default} merge=${merge:-default} ring=${ring:-default} l1=${l1:-default}) rc=$rc"
        [ $rc -ne 0 ] && status=1
      done ;;
    sanitize|sanitize120)
      # Small cases only: the sanitizers slow kernels by ~100x.
      filter='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
      # The sm_120 kernel (mma2, its default pipeline, or the ring/l1 pairs in SAN120) under
      # both tools.
      for cfg in ${SAN120:-/}; do
        IFS=/ read -r ring l1 <<<"$cfg"
        for tool in memcheck racecheck; do
          log="$OUT/sanitize_${tool}_mma2_${ring}_$l1.log"
          MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$ring MLAV_MMA2_L1=$l1 timeout 400 \
            compute-sanitizer --tool $tool --error-exitcode 9 \
            "$BIN/cuda_tests" --gtest_filter="$filter" >"$log" 2>&1
          rc=$?
          grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$log" | head -8
          echo "compute-sanitizer $tool (kernel mma2 ring=${ring:-default} l1=${l1:-default}) rc=$rc"
          [ $rc -ne 0 ] && status=1
        done
      done
      [ "$step" = sanitize120 ] && continue
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
      # The sm_120 kernel as it was through v15 (the v6 kernel: 2 buffers and P).
      MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=2 MLAV_MMA2_L1=0 "$BIN/verify_bench" 2>&1 |
        tee "$OUT/bench_mma2_ring2.txt"
      # The wgmma kernel with the merge kernel instead of the cluster merge.
      MLAV_MERGE=kernel "$BIN/verify_bench" 2>&1 | tee "$OUT/bench_merge_kernel.txt" ;;
    ab120)
      # The sm_120 kernel's rings 3 and 4 alternated twice (v16d), for the spread between runs.
      for i in 1 2; do
        for ring in 3 4; do
          MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$ring timeout 120 "$BIN/verify_bench" 2>&1 |
            tee -a "$OUT/bench_ab120.txt" | grep -E "^(k2|v3|long)"
        done
      done ;;
    l1sweep)
      # The sm_120 kernel's pipeline (cuda/NOTES.md v16): ring 2 (buffers and P) or 3 (P in the
      # ring), L1 prefetch distance 0 (none), 2, 4 chunks, carveout by the rule or 100 (L1 ~28
      # KB, what the RTX PRO 6000 has beside a 99 KB block). SWEEP overrides the list.
      for cfg in ${SWEEP:-2/0/ 2/2/ 3/0/ 3/2/ 3/4/ 3/2/100 2/2/100}; do
        IFS=/ read -r ring l1 carve <<<"$cfg"
        MLAV_CUDA_KERNEL=mma2 MLAV_MMA2_RING=$ring MLAV_MMA2_L1=$l1 MLAV_SMEM_CARVEOUT=$carve \
          timeout 120 "$BIN/verify_bench" 2>&1 | tee -a "$OUT/bench_l1sweep.txt" |
          grep -E "^(k2|v3|long)|MLAV_MMA2"
      done ;;
    peer)
      # FlashInfer's fa2 MLA kernel on the same workloads, in the same call (its own log and
      # JSON under $OUT/peer/).
      # PEER_FI picks the backend (fa2 default; fa3 for the Hopper kernel's class), PEER_ARGS
      # passes bench.py arguments (e.g. --workloads mix-long-short,...).
      fi=${PEER_FI:-fa2}
      (cd "${PEER:-peer}" && OUT="$OUT/peer${PEER_FI:+_$fi}" SKIP_SELFTEST=1 FI_BACKEND=$fi \
        timeout 420 bash run.sh ${PEER_ARGS:-}) 2>&1 | tail -30 ;;
    sweep)
      "$BIN/verify_bench" --sweep 2>&1 | tee "$OUT/bench_sweep.txt" ;;
  esac
done
exit $status

#!/bin/bash
# v37 call 12: which of the ws experiment's changes since v30 cost it the overlap's gain at the
# card's slower tensor rate (cuda/NOTES.md v36: today's form 1.01-1.05x ring 4's time under
# v20c's emulation where v30's form was 0.88-0.94x). build12.sh's forms wsA-wsF and ring 4,
# K = 1, 2, 3 (uniform plan), interleaved, two rounds if the first leaves time; on an H200 also
# ring 4's per-phase trace (K = 1, 2, 3 ex2, K = 1 exp2f) for the card's prediction.
#   carry [".device/k12"]
source scripts/device_call_lib.sh 12
main() {
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  for r in 1 2; do
    if [ $r = 2 ] && [ $(( $(date +%s) - T0 )) -gt 260 ]; then echo "round 2 skipped (time)"; break; fi
    for k in 1 2 3; do
      if [ $k = 1 ]; then MLAV_MMA2_RING=4 run_bench r4_${k}_$r mma2 uniform
      else MLAV_MMA2_RING=4 run_bench r4_${k}_$r mma2 uniform verify_bench_r4_$k; fi
      for f in wsA wsB wsC wsD wsE wsF; do
        bin=verify_bench_$f$k
        [ $f$k = wsA1 ] && bin=verify_bench
        MLAV_MMA2_RING=ws run_bench $f${k}_$r mma2 uniform $bin
      done
    done
    t "round $r"
  done
  case "$gpu" in
    *H200*)
      for v in tr1x tr1 tr2 tr3; do MLAV_MMA2_RING=4 run_trace $v; done
      t trace ;;
    *) echo "trace skipped: $gpu is not an H200" ;;
  esac
}
main 2>&1 | tee "$O/summary.txt"
finish

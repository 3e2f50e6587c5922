#!/bin/bash
# kernel13 device steps. usage: k13_run.sh STEP...  (tests | bench | sanitize | props | peer2 | peer3 | mma6)
set -u
B=.kern/bin13
O=/tmp/o; mkdir -p $O
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
[ -e /work/wt-kernel13/scenarios ] || { mkdir -p /work/wt-kernel13; ln -s "$PWD/.kern/scen13" /work/wt-kernel13/scenarios; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
st=0
for step in "$@"; do
  t0=$(date +%s)
  case $step in
    tests)
      for cfg in ${CFGS:-wgmma/// wgmma/folded/kernel wgmma/unfolded/ mma6// mma2/// mma2///3/2 mma2///2/0}; do
        IFS=/ read -r k plan merge ring l1 <<<"$cfg"
        n=$(echo "$cfg" | sed -e 's#/*$##' -e 's#/#_#g')
        MLAV_CUDA_KERNEL=$k MLAV_DRAFT_PLAN=$plan MLAV_MERGE=$merge MLAV_MMA2_RING=$ring MLAV_MMA2_L1=$l1 \
          timeout 200 $B/cuda_tests > $O/tests_$n.log 2>&1; rc=$?
        grep -E "FAILED|Failure|PASSED" $O/tests_$n.log | head -20
        grep -E "^\[ratio\] balanced" $O/tests_$n.log | head -4
        echo "cuda_tests $cfg rc=$rc"; [ $rc -ne 0 ] && st=1
      done ;;
    bench)
      for k in ${BK:-mma2 wgmma}; do for plan in ${BP:-balanced uniform}; do
        MLAV_CUDA_KERNEL=$k MLAV_BENCH_PLAN=$plan timeout 150 $B/verify_bench > $O/bench_${k}_$plan.txt 2>&1
        echo "== bench $k $plan rc=$?"; grep -E "^(k2|v3|long|mix)|ceilings \(" $O/bench_${k}_$plan.txt
      done; done ;;
    mma6)
      MLAV_CUDA_KERNEL=mma6 timeout 150 $B/verify_bench > $O/bench_mma6_balanced.txt 2>&1
      echo "== bench mma6 balanced rc=$?"; grep -E "^(k2|v3|long|mix)" $O/bench_mma6_balanced.txt ;;
    sanitize)
      f='CudaLaws.*:*CudaGraph*:*h1_d1_p0*:*tile_edges*:*p1_splits2*:*draft_bits*:*balanced*'
      for k in ${SK:-mma2 wgmma}; do for tool in memcheck racecheck; do
        MLAV_CUDA_KERNEL=$k timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B/cuda_tests --gtest_filter="$f" > $O/san_${tool}_$k.log 2>&1; rc=$?
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $O/san_${tool}_$k.log | head -8
        echo "sanitizer $tool $k rc=$rc"; [ $rc -ne 0 ] && st=1
      done; done ;;
    props)
      for k in wgmma mma2; do
        MLAV_CUDA_KERNEL=$k RC_PARAMS="seed=20261201" timeout 200 $B/props_tests --gtest_filter='*cuda*' > $O/props_$k.log 2>&1; rc=$?
        tail -3 $O/props_$k.log; echo "props cuda $k rc=$rc"; [ $rc -ne 0 ] && st=1
      done ;;
    peer2|peer3)
      fi=fa${step#peer}
      (cd .kern/peer && OUT="$O/peer_$fi" SKIP_SELFTEST=1 FI_BACKEND=$fi timeout 300 bash run.sh --workloads ${WL:-k2-tp8-tree16,v3-tp8-tree32,v3-tp8-chain4,k2-tp8-ddtree128,v3-tp1-tree8,long-ctx,mix-long-short,mix-64x100-4000,mix-p0-p1-p4097}) > $O/peer_${fi}_run.txt 2>&1
      echo "== peer $fi rc=$?"; grep -E "^\| (k2|v3|long|mix)" $O/peer_$fi/peer_log.txt | tail -9 | cut -d'|' -f2,12,13,18 ;;
  esac
  echo "[step $step: $(( $(date +%s) - t0 )) s]"
done
tar czf $OUT/k13.tgz -C $O .
exit $st

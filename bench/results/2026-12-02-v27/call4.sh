#!/bin/bash
# Session 16, call 4: MLAV_COPY_LATE=k (the same bits): each step issues its ahead chunk after
# k16 step k - 1 of its compute instead of right after its barrier, so the step's first ldmatrix
# do not queue behind 8 warps' LDGSTS. The kernel against k = 1, 2, 3 (3 spills a few bytes in
# some instances), two rounds; traces of the kernel, k = 1 and 2; cuda_tests linked against k = 2.
# First: the default build's verify_partial_s2 SASS at this commit against 1c1db9a's (the step's
# copy moved into a lambda; with MLAV_COPY_LATE=0 it should compile to the same instructions).
source scripts/device_call_lib.sh 4
export PATH=$PATH:/usr/local/cuda/bin
d() { cuobjdump -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -e 's#/\*[0-9a-f]*\*/##g'; }
d .device/k4/old_verify_partial_s2.cu.o > $O/old.sass; d .device/k4/new_verify_partial_s2.cu.o > $O/new.sass
echo "sass lines old $(wc -l < $O/old.sass) new $(wc -l < $O/new.sass); diff lines: $(diff $O/old.sass $O/new.sass | wc -l)"
gzip $O/old.sass $O/new.sass
run_tests mma2
run_tests mma2 cuda_tests_late2
t tests
for round in 1 2; do
  run_bench base_$round mma2 uniform
  for k in 1 2 3; do run_bench late${k}_$round mma2 uniform verify_bench_late$k; done
done
t bench
for v in trace0 late1trace late2trace; do
  MLAV_CUDA_KERNEL=mma2 MLAV_BENCH_PLAN=uniform timeout 90 $B/verify_bench_$v > $O/$v.txt 2>&1
  echo "$v rc=$?: $(grep -E '^(k2|v3|long|mix)' $O/$v.txt | awk '{printf "%s ", $3}')"
  grep MMATRACE $O/$v.txt | head -2 | sed 's/blocks with.*cycles per tile//'
done
t traces
finish

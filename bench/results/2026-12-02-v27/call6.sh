#!/bin/bash
# Session 16, call 6: after the MLAV_COPY_LATE range static_assert (compile-time only): the
# default build's partial-kernel SASS against call 4's (2ecadcc) and cuda_tests on mma2 and mma6.
source scripts/device_call_lib.sh 6
export PATH=$PATH:/usr/local/cuda/bin
d() { cuobjdump -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -e 's#/\*[0-9a-f]*\*/##g'; }
d .device/k6/prev_verify_partial_s2.cu.o > $O/prev.sass; d .device/k6/new_verify_partial_s2.cu.o > $O/new.sass
echo "sass lines prev $(wc -l < $O/prev.sass) new $(wc -l < $O/new.sass); diff lines: $(diff $O/prev.sass $O/new.sass | wc -l)"
rm $O/prev.sass $O/new.sass
run_tests mma2
run_tests mma6
t tests
finish

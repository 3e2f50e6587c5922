#!/bin/bash
# Session 18, call 4, at the session's last code commit (its cuda/ commits add timing-only macros
# whose default expansion leaves both mma.sync units' sm_90 and sm_120 PTX byte-identical to
# 799cd62's, checked on the build machine): cuda_tests on the three kernels, and the default
# benchmark once (the balanced plan, with the peers' absence noted: no peer run this call).
source scripts/device_call_lib.sh 4
for k in mma2 mma6 wgmma; do run_tests $k; done
t tests
run_bench mma2_balanced mma2 balanced
run_bench wgmma_balanced wgmma balanced
t bench
finish

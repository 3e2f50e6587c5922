#!/bin/bash
# Session 18, call 6, at c92944f (the last cuda/ commit: MLAV_RING_EXTRA's range check and a
# comment; the default PTX byte-identical to 799cd62's, checked on the build machine):
# cuda_tests on the three kernels once more.
source scripts/device_call_lib.sh 6
for k in mma2 mma6 wgmma; do run_tests $k; done
t tests
finish

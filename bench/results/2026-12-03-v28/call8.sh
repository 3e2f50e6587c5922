#!/bin/bash
# Session 17, call 8, at the session's last code commit: the default build's partial kernels'
# SASS against c72e14e's once more (after the trace builds' wait sum, the comments and the
# variant's default register split).
source scripts/device_call_lib.sh 8
sass_diff s2 .device/k8/prev_verify_partial_s2.cu.o .device/k8/new_verify_partial_s2.cu.o
sass_diff s6 .device/k8/prev_verify_partial_s6.cu.o .device/k8/new_verify_partial_s6.cu.o
t sass
finish

#!/bin/bash
# Sourced at the top of a device call's script: on an H200 (the issue-13 machine), unless
# SKIP_TABLE=1, it replaces the call with the README's table (v42's call7.sh, run from the staged
# binaries .device/kN) and never returns; on any other card it returns and the call goes on.
#   source scripts/h200_table_call.sh N
if [ "${SKIP_TABLE:-0}" != 1 ] &&
   nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed -e "s#source scripts/device_call_lib.sh 6#source scripts/device_call_lib.sh $1#" \
    bench/results/2026-12-07-v42/call7.sh > "/tmp/call7_k$1.sh"
  LIMIT=${LIMIT:-570} exec bash "/tmp/call7_k$1.sh"
fi

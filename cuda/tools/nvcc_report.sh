#!/bin/sh
# Compiler launcher for the CUDA objects: runs the compile (through ccache when given) and keeps
# ptxas's resource report (-Xptxas -v) beside the object as <object>.ptxas.txt for the check.
# usage: nvcc_report.sh [ccache] <nvcc> <args...>
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
if [ -z "$out" ]; then exec "$@"; fi
"$@" 2>"$out.ptxas.txt"
rc=$?
cat "$out.ptxas.txt" >&2
exit $rc

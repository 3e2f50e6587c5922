#!/bin/bash
# Builds the two mutants of cuda/verify_kernel.cpp that call1.sh runs the layered graph test on
# (.device/k7m/bin.tgz), then rebuilds the unmutated cuda_tests.
#   m1: plan() enqueues nothing;  m2: attend() drops the plan (the uniform grid).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cp cuda/verify_kernel.cpp /tmp/vk.orig
trap 'cp /tmp/vk.orig cuda/verify_kernel.cpp' EXIT
mkdir -p .device/k7m
python3 - <<'PY'
s = open('/tmp/vk.orig').read()
m1 = s.replace("void VerifyKernel::plan() { enqueue(true, false); }",
               "void VerifyKernel::plan() { (void)launch_args(); }")
m2 = s.replace("  if (!attend) return;\n", "  if (!attend) return;\n  if (!plan) args.plan = nullptr;\n")
assert m1 != s and m2 != s
open('/tmp/vk.m1', 'w').write(m1)
open('/tmp/vk.m2', 'w').write(m2)
PY
for m in m1 m2; do
  cp /tmp/vk.$m cuda/verify_kernel.cpp
  ninja -C build-cuda cuda_tests > /dev/null
  cp build-cuda/tests/cuda/cuda_tests .device/k7m/cuda_tests_$m
done
cp /tmp/vk.orig cuda/verify_kernel.cpp
ninja -C build-cuda cuda_tests > /dev/null
tar czf .device/k7m/bin.tgz -C .device/k7m cuda_tests_m1 cuda_tests_m2
rm .device/k7m/cuda_tests_m1 .device/k7m/cuda_tests_m2
ls -la .device/k7m/bin.tgz

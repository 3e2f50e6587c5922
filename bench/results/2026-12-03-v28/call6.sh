#!/bin/bash
# Session 17, call 6: where the copy warpgroup's math warps spend their chunk steps. The trace
# builds now also add up each chunk step's wait (from the step's start to its chunk being there:
# cp.async.wait_group and the block barrier in the kernel, the "full" mbarrier in the copy-warp
# form). If the math warps wait long for chunks with the copies off them, the chunk stream is
# what is slow; if not, the copies slow the math warps' own shared-memory instructions.
source scripts/device_call_lib.sh 6
# (cwtrace: the copy-warp form at 40 / 232 with the trace spills 40-44 bytes; the kernel's trace
# build does not)
for v in mmatrace cwtrace; do run_trace $v; done
t traces
finish

#!/bin/bash
# v38 call 17, the README table's second half: the same round of our kernels as call 16 (r = 2)
# and fa2 in the shape an sm_120 part gives it (scripts/peer_fa2_sm120.sh, 101,376 bytes per
# SM) on the nine, the same call.
#   carry [".device/k16", ".device/mixpeer"] (build16.sh's)
CALL16_LIB=1 source bench/results/2026-12-06-v38/call16.sh
O=/tmp/o17
rm -rf $O && mkdir -p $O
main() {
  bench_round 2
  PEER=.device/mixpeer OUT=$O/peer_sm120 PEER_MAIN=0 timeout 220 scripts/peer_fa2_sm120.sh \
    --workloads $W > $O/peer_sm120_run.txt 2>&1
  echo "fa2 sm120 shape rc=$?"
  grep -E '^\| (k2|v3|long|mix)' $O/peer_sm120/peer_log.txt | tail -9
  t fa2_sm120
}
main 2>&1 | tee "$O/summary.txt"
call_n=17
finish

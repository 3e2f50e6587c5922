#!/bin/bash
# FlashInfer's fa2 MLA kernel as an sm_120 part would run it, timed on the H200 (cuda/NOTES.md v22).
# fa2 picks its tile shape from the device's shared memory per SM (mla.cuh DISPATCH_SMEM_CONFIG):
# the H200's 228 KB give 2 stages of 64-key tiles, which is what every fa2 number in this project
# is; sm_120's 101,376 bytes give 1 stage of 16-key tiles without the S split between
# warpgroups. All three shapes are compiled into the one JIT module (the choice is made at run
# time), so this run only overrides the value the dispatch reads: in a copy of the peer folder,
# after its run.sh installs the carried wheel, the installed mla.cuh and the Python plan check
# (which must agree on the tile) read MLAV_FI_SMEM_PER_SM when it is set. A measuring tool: it
# edits a private copy of another project's files, never this repository's code.
# usage: PEER=<copy of /work/shared/peer> OUT=<dir> scripts/peer_fa2_sm120.sh [--workloads a,b]
set -euo pipefail
peer=$(realpath "${PEER:?PEER: a copy of the peer folder}")
work=/tmp/peer_fa2_sm120
rm -rf "$work" && cp -r "$peer" "$work"
cat > "$work/patch_smem.sh" <<'PATCH'
set -e
cuh=/tmp/site/flashinfer/data/include/flashinfer/attention/mla.cuh
py=/tmp/site/flashinfer/mla/_batch_mla/_backends/_fa_common.py
grep -q MLAV_FI_SMEM_PER_SM "$cuh" || python3 - "$cuh" "$py" <<'PY'
import sys
cuh, py = sys.argv[1], sys.argv[2]
s = open(cuh).read()
call = "cudaDeviceGetAttribute(&smem_limit_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);"
assert s.count(call) == 1, "mla.cuh: the dispatch's attribute read moved"
s = s.replace(call, call + '\n  if (const char* e = std::getenv("MLAV_FI_SMEM_PER_SM")) smem_limit_per_sm = std::atoi(e);')
s = s.replace("#include <cstdint>", "#include <cstdint>\n#include <cstdlib>", 1)
open(cuh, "w").write(s)
p = open(py).read()
head = 'def _get_fa_shared_memory_limits(device: torch.device) -> tuple[int, int]:\n    """Return per-SM and opt-in per-block limits, including on older PyTorch."""\n'
assert p.count(head) == 1, "_fa_common.py: the limits function moved"
p = p.replace(head, head + '    import os\n    if os.environ.get("MLAV_FI_SMEM_PER_SM"):\n        v = int(os.environ["MLAV_FI_SMEM_PER_SM"])\n        return v, v\n')
open(py, "w").write(p)
print("patched mla.cuh and _fa_common.py: MLAV_FI_SMEM_PER_SM =", __import__("os").environ.get("MLAV_FI_SMEM_PER_SM"))
PY
PATCH
# Patch after run.sh installs the wheel (it reinstalls on every run), before FlashInfer imports.
sed -i 's|^  rc_pip=\$?$|  rc_pip=$?; [ $rc_pip -eq 0 ] \&\& bash "$HERE/patch_smem.sh" 2>\&1 \| tee -a "$LOG"|' "$work/run.sh"
# Its own JIT cache (a module built from the unpatched header would be reused otherwise), and
# the Triton and PyTorch peers (or whichever step 1 runs in this copy) only with PEER_MAIN=1 (they
# do not depend on the override).
sed -i 's|/tmp/fi_ws|/tmp/fi_ws_sm120|g' "$work/run.sh"
sed -i 's|^python3 bench.py --peers |[ "${PEER_MAIN:-0}" = 1 ] \&\& python3 bench.py --peers |' "$work/run.sh"
for want in patch_smem fi_ws_sm120 PEER_MAIN; do
  grep -q "$want" "$work/run.sh" || { echo "run.sh: a step this script edits moved ($want)" >&2; exit 2; }
done
cd "$work"
MLAV_FI_SMEM_PER_SM=${MLAV_FI_SMEM_PER_SM:-101376} FI_BACKEND=fa2 SKIP_SELFTEST=1 bash run.sh "$@"

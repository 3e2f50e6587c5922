#!/usr/bin/env bash
# The main job: install what is missing, build, then run the model self-check, fuzz campaigns
# against the CPU backend (both of its split plans), every scenario replay and the shipped SGLang dumps (their server o
# against the model, and the backend on them). Extra arguments go to the fuzz campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh mlaverify
cli=build/cli/mlaverify
"$cli" selfcheck
"$cli" fuzz --backend "${MLAV_BACKEND:-cpu}" --cases "${MLAV_CASES:-100}" --out fuzz-failures "$@"
# The CPU backend has two split plans (the mma.sync kernels' and the wgmma kernel's folded one):
# the default job fuzzes both, the folded plan on the first half of the same cases.
if [ -z "${MLAV_BACKEND:-}" ]; then
  "$cli" fuzz --backend cpu-folded --cases "$(( (${MLAV_CASES:-100} + 1) / 2 ))" \
    --out fuzz-failures "$@"
fi
"$cli" replay --backend "${MLAV_BACKEND:-cpu}" scenarios/cases scenarios/dumps

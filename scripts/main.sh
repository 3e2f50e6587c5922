#!/usr/bin/env bash
# The main job: install what is missing, build, then run the model self-check, a fuzz campaign
# against the CPU backend, every scenario replay and the shipped SGLang dumps (their server o
# against the model, and the backend on them). Extra arguments go to the fuzz campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh mlaverify
cli=build/cli/mlaverify
"$cli" selfcheck
"$cli" fuzz --backend "${MLAV_BACKEND:-cpu}" --cases "${MLAV_CASES:-100}" --out fuzz-failures "$@"
"$cli" replay --backend "${MLAV_BACKEND:-cpu}" scenarios/cases scenarios/dumps

#!/usr/bin/env bash
# `loopgate pair` on a GPU runner with the miniature as the command (suites/cli/pair/run_arm.sh --device cuda):
# the good candidate (syncfree, a NaN injected into the loss at iteration 2) exits 0, and defect-nan-after-step
# is rejected by "NaN before the step" (exit 1). Builds only the loopgate executable.
#   bash ci/gpu-pair.sh OUT     (OUT: the two pairs' output and JSON; their runs under $PAIR_RUNS, default /tmp/gpu-pair)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ci/gpu-pair.sh OUT}
mkdir -p "$out"
RESULTS="$out" bash ci/gpu-build.sh loopgate
lg=$PWD/build/gpu/tools/loopgate
arm="$PWD/suites/cli/pair/run_arm.sh $(command -v mpiexec) $lg --device cuda"
common=(pair --counter off --runs 2 --allow-arg arm=the-arm-under-test --nan-inject iter=2,site=loss
        --allow-sync batched_log_read=the-one-batched-log-read)
rc_good=0 rc_bad=0
"$lg" "${common[@]}" --out-dir "${PAIR_RUNS:-/tmp/gpu-pair}/good" --json "$out/good.json" --baseline "$arm" --candidate "$arm --arm syncfree" \
  > "$out/good.txt" 2>&1 || rc_good=$?
"$lg" "${common[@]}" --out-dir "${PAIR_RUNS:-/tmp/gpu-pair}/bad" --json "$out/bad.json" --baseline "$arm" \
  --candidate "$arm --arm defect-nan-after-step" > "$out/bad.txt" 2>&1 || rc_bad=$?
echo "gpu-pair: good candidate exit $rc_good (expected 0), defect-nan-after-step exit $rc_bad (expected 1)"
[ "$rc_good" = 0 ] && [ "$rc_bad" = 1 ]

#!/usr/bin/env bash
# GPU CI, one command: build (ci/gpu-build.sh), run the tests labelled gpu with one GPU per rank through CTest
# resource groups, then the GPU gate, `loopgate gate --device cuda`: every check on every fixture whose ranks fit
# this runner's GPUs (one rank per GPU; the others left out with one line each), with the GPU-only checks
# (ledger == CUPTI, the capture probe), and writes its HTML report. Tests that need more GPUs than the runner has
# are left out with one line per GPU count (ci/gpu-select.sh); no GPU at all is a failure. Exit: the gate's (0 pass,
# 1 fail, 2 bad input), or 1 when the gate passed and CTest did not. The report step was checked on CPU with call 2's
# GPU gate JSON and Traces (results/history/results-gpu-log.md §13), not yet on a GPU runner.
#   bash ci/gpu.sh                                  # build + ctest -L gpu + the gate
#   LOOPGATE_VENDOR_DIR=/path bash ci/gpu.sh        # runner image without gtest / nlohmann / CLI11 packages
#   NO_BUILD=1 bash ci/gpu.sh                       # on a built tree
#   GATE_ARGS="--fixture single" bash ci/gpu.sh     # arguments for the gate (a JSON goes to $RESULTS/gate.json)
#   DRY_RUN=1 [BUILD_DIR=build/gpu] bash ci/gpu.sh  # no build, no run: what this runner would run
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-select.sh
source ci/gpu-env.sh
B="${BUILD_DIR:-build/gpu}"
R="${RESULTS:-$B/results}"
mkdir -p "$R"
start=$(date +%s)
if [ "${DRY_RUN:-0}" != 1 ] && [ "${NO_BUILD:-0}" != 1 ]; then
  bash ci/gpu-build.sh || exit 1
fi

ngpu="$(lg_gpu_count)"
if [ "$ngpu" -lt 1 ]; then
  smi=$( (nvidia-smi -L 2>&1 || true) | head -1)
  echo "gpu.sh: no GPU visible (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-<unset>}'; nvidia-smi -L: '${smi}')" >&2
  exit 1
fi
lg_ctest_gpu_filter "$B" "$ngpu"
spec="$PWD/ci/gpu-resources.json"
if [ "$ngpu" != 2 ]; then
  spec="$(cd "$B" && pwd)/gpu-resources.json"
  python3 - "$ngpu" > "$spec" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"version": {"major": 1, "minor": 0},
                  "local": [{"gpus": [{"id": str(i), "slots": 1} for i in range(n)]}]}))
PY
fi
cmd=(ctest --test-dir "$B" -L gpu "${LG_CTEST_FILTER[@]}" --resource-spec-file "$spec" -j "$ngpu" --output-on-failure)
gate=("$B/tools/loopgate" gate --device cuda --json "$R/gate.json" --junit "$R/gate.xml" ${GATE_ARGS:-})
if [ "${DRY_RUN:-0}" = 1 ]; then
  echo "gpu.sh: $ngpu GPU(s); would run: ${cmd[*]} ${CTEST_ARGS:-}"
  "${cmd[@]}" -N ${CTEST_ARGS:-} | grep -E '^ *Test +#|^Total Tests'
  echo "gpu.sh: then: ${gate[*]}"
  exit 0
fi
"${cmd[@]}" ${CTEST_ARGS:-}
ctest_rc=$?
tested=$(date +%s)
"${gate[@]}"
gate_rc=$?
if [ -s "$R/gate.json" ]; then  # the same HTML page as the CPU job's (docs/report.md)
  "$B/tools/loopgate" report --gate "$R/gate.json" --out "$R/report.html" && echo "gpu.sh: report $(readlink -f "$R/report.html")"
fi
echo "gpu.sh: ctest exit $ctest_rc, gate exit $gate_rc; $(( tested - start )) s to the end of CTest, gate $(( $(date +%s) - tested )) s"
[ "$gate_rc" -ne 0 ] && exit "$gate_rc"
[ "$ctest_rc" -ne 0 ] && exit 1
exit 0

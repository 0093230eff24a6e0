#!/usr/bin/env bash
# The README's test command: installs dependencies, configures and builds with the `cpu` preset, and runs every
# CPU test (unit, multi-rank at np 2/4/8/64, harness self-tests, gate suites on every CPU fixture), prints the
# gate's CTest times against ci/gate-budget.json (ci/gate-budget.py, a report that never fails the run), then
# installs the package and runs examples/custom_arm against it (ci/custom-arm.sh), then fuzzes the parsers for a
# fixed time each (ci/fuzz.sh: its own build, build/cpu-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps-cpu.sh
export CCACHE_SLOPPINESS=pch_defines,time_macros
start=$(date +%s)
cmake --preset cpu
cmake --build --preset cpu
built=$(date +%s)
ctest --preset cpu "$@"
tested=$(date +%s)
python3 ci/gate-budget.py build/cpu ci/gate-budget.json || true  # the gate's CTest times against their budget (a report)
bash ci/custom-arm.sh
installed=$(date +%s)
bash ci/fuzz.sh
echo "test-cpu: build $((built - start)) s, tests $((tested - built)) s, installed package + custom_arm example" \
     "$((installed - tested)) s, fuzz $(( $(date +%s) - installed )) s"

#!/usr/bin/env bash
# The gate suites on the GPU tier (NCCL, one GPU per rank, bf16 params): equivalence, nan_detection, timers,
# logging_exit and sync_budget for every candidate arm, per fixture whose rank count fits the GPUs present (single
# on one GPU; tp2sp and pp2 on two; pp2tp2dp2 on eight; dp64 needs 64: see docs/cluster.md); a fixture that does
# not fit is left out with one line saying so (ci/gpu-select.sh). Then the GPU-only verdicts of
# suites/gpu/test_gpu_loop.cpp (ledger == CUPTI per site per iteration for every arm, the CUDA-graph capture probe)
# on the same fixtures. Builds with the gpu preset first when BUILD=1. Logs and gtest JSON go to $RESULTS.
# GATES_FIXTURES / LOOP_FIXTURES pick fixtures ("none" skips that part), GATES_FILTER the gate tests.
# DRY_RUN=1 prints the mpirun commands instead of running them (BUILD_DIR: the tree holding suites/loopgate_gates).
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-select.sh
B="${BUILD_DIR:-build/gpu}"
R="${RESULTS:-$B/results}"
mkdir -p "$R"
source ci/gpu-env.sh
export GTEST_COLOR=no
if [ "${BUILD:-0}" = 1 ]; then
  RESULTS="$R" bash ci/gpu-build.sh loopgate_gates loopgate loopgate_gpu_loop || exit 1
fi
F='Arms/Equivalence.*:GatePower.Equivalence*:Arms/NanDetection.*:NanDetection.*:GatePower.NanDetection*'
F+=':Arms/Timers.*:Timers.*:GatePower.Timers*:Arms/LoggingExit.*:LoggingExit.*:GatePower.LoggingExit*'
F+=':Arms/SyncBudget.*:SyncBudget.*:GatePower.SyncBudget*'
F="${GATES_FILTER:-$F}"  # e.g. only the equivalence gate
ngpu="$(lg_gpu_count)"
if [ "$ngpu" -lt 1 ]; then
  echo "gpu-gates: no GPU visible (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-<unset>}')" >&2
  exit 1
fi
known="$(lg_fixture_ranks "$B/suites/loopgate_gates")"  # name:ranks of every fixture, from the executable
if [ -z "$known" ]; then
  echo "gpu-gates: $B/suites/loopgate_gates --lg_describe=json listed no fixture (not built? BUILD=1 builds it)" >&2
  exit 1
fi
# Each list: the fixtures asked for (default: every one), less those needing more GPUs than this runner has.
pick() {  # pick WANTED -> "name:ranks ..." in LG_FIXTURES; "none" -> nothing
  LG_FIXTURES=""
  [ "$1" = none ] && return 0
  lg_fixtures_that_fit "$ngpu" "$known" "$1" || exit 2
  if [ -z "$LG_FIXTURES" ] && [ -n "$1" ]; then
    echo "gpu-gates: none of the fixtures asked for ($1) fits $ngpu GPU(s)" >&2
    exit 1
  fi
}
pick "${GATES_FIXTURES:-}"
fixtures="$LG_FIXTURES"
if [ "${LOOP_FIXTURES:-}" = "${GATES_FIXTURES:-}" ]; then
  loop_fixtures="$fixtures"  # the same list: its left-out lines are printed once
else
  pick "${LOOP_FIXTURES:-}"
  loop_fixtures="$LG_FIXTURES"
fi
# run LIMIT_S LOG CMD...: one launch, or its command line under DRY_RUN=1.
run() {
  local limit=$1 log=$2
  shift 2
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "would run: timeout $limit $* > $log"
    return 0
  fi
  timeout "$limit" "$@" > "$log" 2>&1
}
# The 1-2 rank limits are measured (results/history/results-gpu-log.md: pp2's five gates 321 s); larger fixtures' are a guess.
limit_for() { if [ "$1" -le 2 ]; then echo 400; else echo 1200; fi; }
rc=0
for entry in $fixtures; do
  fx=${entry%%:*} np=${entry##*:}
  start=$(date +%s)
  run "$(limit_for "$np")" "$R/gates_$fx.log" mpirun -np "$np" "$B/suites/loopgate_gates" --lg_fixture="$fx" \
    --lg_device=cuda --lg_timeout=300 "--gtest_filter=$F" --gtest_output=json:"$R/gates_$fx.json"
  r=$?
  [ "${DRY_RUN:-0}" = 1 ] && continue
  echo "gates $fx np $np: exit $r, $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$R/gates_$fx.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && rc=1
done
for entry in $loop_fixtures; do
  fx=${entry%%:*} np=${entry##*:}
  # Two processes: a refused capture (the baseline's probe) comes last in its own process.
  for part in LedgerEqualsCupti CaptureProbe; do
    start=$(date +%s)
    run "$(limit_for "$np")" "$R/gpu_loop_${part}_$fx.log" mpirun -np "$np" "$B/suites/gpu/loopgate_gpu_loop" \
      --lg_fixture="$fx" --lg_timeout=300 "--gtest_filter=*$part*" --gtest_output=json:"$R/gpu_loop_${part}_$fx.json"
    r=$?
    [ "${DRY_RUN:-0}" = 1 ] && continue
    echo "gpu_loop $part $fx np $np: exit $r, $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$R/gpu_loop_${part}_$fx.log" | tr '\n' ' ')"
    [ $r -ne 0 ] && rc=1
  done
done
exit $rc

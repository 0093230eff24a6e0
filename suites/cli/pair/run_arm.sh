#!/usr/bin/env bash
# One run of `loopgate pair`'s CPU tests: `loopgate run` on the single fixture, one rank, leaving in the run's
# folder ($LOOPGATE_PAIR_DIR) its Trace (exact bits) and its host reads as a sync table, and injecting the fault
# the pair hands over ($LOOPGATE_NAN_INJECT, the injected runs only) with the step skipped.
# usage: run_arm.sh MPIEXEC LOOPGATE [loopgate run flags...]
set -euo pipefail
mpiexec=$1 loopgate=$2
shift 2
inject=()
if [[ -n ${LOOPGATE_NAN_INJECT:-} ]]; then inject=(--inject "$LOOPGATE_NAN_INJECT" --on-fault skip); fi
exec "$mpiexec" -n 1 "$loopgate" run --iters 6 --trace "$LOOPGATE_PAIR_DIR/trace.json" \
  --syncs-json "$LOOPGATE_PAIR_DIR/syncs.1.json" "${inject[@]}" "$@"

#!/usr/bin/env bash
# `loopgate pair --run-timeout`: a run past its limit is ended together with everything it started (its process
# group: mpirun, torchrun and their ranks), and its row says it timed out. The candidate here starts a background
# sleep and waits for it; once the pair has returned, that sleep must be gone.
#   pair_run_timeout.sh LOOPGATE DIR BASELINE_COMMAND
set -u
LG=$1 DIR=$2 BASE=$3
rm -rf "$DIR"
mkdir -p "$DIR"
out=$("$LG" pair --counter off --runs 1 --run-timeout 2 --out-dir "$DIR/pair" --baseline "$BASE" \
  --candidate "sleep 300 & echo \$! > $DIR/child.pid; wait" 2>&1)
rc=$?
echo "$out" | tail -6
[ "$rc" = 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
echo "$out" | grep -q "(timed out)" || { echo "FAIL: no run said '(timed out)'"; exit 1; }
pid=$(cat "$DIR/child.pid" 2>/dev/null) || { echo "FAIL: the candidate never started its child"; exit 1; }
# Gone, or a zombie nobody reaps (a container whose first process does not): either way no longer running.
state=$(ps -o stat= -p "$pid" 2>/dev/null | tr -d ' ')
if [ -n "$state" ] && [ "${state:0:1}" != Z ]; then
  kill "$pid"
  echo "FAIL: the candidate's child (pid $pid) outlived the timeout"
  exit 1
fi
echo "PASS: the candidate timed out and its child (pid $pid) ended with its process group"

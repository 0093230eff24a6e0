#!/usr/bin/env bash
# An expected failure of the MPI harness: runs the command, and passes only when it fails (non-zero exit) within
# MAX_SECONDS, its output matches every REGEX given, and no process whose command line holds MARKER (the
# executable and this test's own arguments: tests running beside it are not its leftovers) is left behind.
# Usage: expect_failure.sh MAX_SECONDS MARKER 'REGEX1' ['REGEX2' ...] -- mpiexec -n N EXE ARGS...
set -u
max=$1; marker=$2; shift 2
regexes=()
while [ "$1" != "--" ]; do regexes+=("$1"); shift; done
shift
start=$(date +%s%N)
out=$("$@" 2>&1)
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s\n' "$out" | grep -E 'loopgate|exited|abort' | head -20
fail=0
[ "$rc" -ne 0 ] || { echo "expect_failure: the command passed (exit 0)"; fail=1; }
[ "$ms" -le $(( max * 1000 )) ] || { echo "expect_failure: took ${ms} ms > ${max} s"; fail=1; }
for re in "${regexes[@]}"; do
  printf '%s\n' "$out" | grep -Eq "$re" || { echo "expect_failure: output lacks /$re/"; fail=1; }
done
# No rank of this test left behind (one spinning in a collective after the job "ended").
sleep 1
left=""
for p in /proc/[0-9]*; do
  [ "${p#/proc/}" = "$$" ] && continue
  cmd=$(tr '\0' ' ' 2>/dev/null < "$p/cmdline") || continue
  case "$cmd" in *"$marker"*) left="$left ${p#/proc/}" ;; esac
done
[ -z "$left" ] || { echo "expect_failure: processes left behind:$left"; kill -9 $left 2>/dev/null; fail=1; }
echo "expect_failure: exit $rc after ${ms} ms"
exit $fail

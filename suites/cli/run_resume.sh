#!/usr/bin/env bash
# run_resume.sh LOOPGATE MPIEXEC: restart replay across processes. `loopgate run` to 12 iterations; the same saved
# at 6 and ended there (--save, --exit-interval 6, baseline); new processes that load it and continue (baseline and
# zerosync); their Megatron lines after iteration 6 must equal the uninterrupted run's of the same arm as printed
# (the timestamp and the timing field left out). Also a damaged rank file must be refused at --load, one line, exit 2.
set -u
LG=$1 MPIEXEC=$2
W=$(mktemp -d /tmp/loopgate-resume-XXXXXX)
trap 'rm -rf "$W"' EXIT
run() { "$MPIEXEC" -q -n 2 "$LG" run --fixture tp2sp --iters 12 --log-interval 2 "$@"; }
lines_after_6() { grep -o 'iteration  *[0-9]*/.*' "$1" | sed 's/elapsed time per iteration (ms): [0-9.]* |//' |
                  awk '{ split($2, a, "/"); if (a[1] + 0 > 6) print }'; }
fail=0
run --arm baseline --save "$W/ck" --exit-interval 6 > "$W/save.log" 2>&1 || { echo "FAIL the saving run"; cat "$W/save.log"; exit 1; }
[ "$(cat "$W/ck/latest_checkpointed_iteration.txt")" = 6 ] || { echo "FAIL the tracker does not name iteration 6"; exit 1; }
for arm in baseline zerosync; do
  run --arm "$arm" > "$W/full_$arm.log" 2>&1 || { echo "FAIL $arm uninterrupted"; fail=1; }
  run --arm "$arm" --load "$W/ck" > "$W/resumed_$arm.log" 2>&1 || { echo "FAIL $arm resumed"; cat "$W/resumed_$arm.log"; fail=1; }
  n=$(lines_after_6 "$W/full_$arm.log" | wc -l)
  if [ "$n" -ne 3 ] || ! diff <(lines_after_6 "$W/full_$arm.log") <(lines_after_6 "$W/resumed_$arm.log"); then
    echo "FAIL $arm resumed from the baseline's checkpoint differs from $arm uninterrupted after iteration 6 ($n lines)"
    fail=1
  else
    echo "ok: $arm resumed in a new process prints the uninterrupted run's $n lines after iteration 6"
  fi
done
# A damaged file: one byte of rank 1's flipped.
f="$W/ck/iter_0000006/rank_00001.pt"
printf '\xff' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
run --arm baseline --load "$W/ck" > "$W/damaged.log" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "loopgate: error: .*--load .*rank_00001.pt" "$W/damaged.log"; then
  echo "FAIL a damaged checkpoint: exit $rc, expected 2 and a line naming rank_00001.pt:"; cat "$W/damaged.log"; fail=1
else
  echo "ok: a damaged checkpoint is refused: $(grep -m1 'loopgate: error' "$W/damaged.log")"
fi
exit $fail

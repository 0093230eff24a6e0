#!/usr/bin/env bash
# run_resume.sh LOOPGATE MPIEXEC: restart replay across processes. `loopgate run` to 12 iterations; the same saved
# at 6 and ended there (--save, --exit-interval 6, baseline); new processes that load it and continue (baseline and
# zerosync); their Megatron lines after iteration 6 must equal the uninterrupted run's of the same arm as printed
# (the timestamp and the timing field left out), and each log point's timer window (the iterations its elapsed time
# covers, from the Traces) must be the uninterrupted run's: a loaded run's first window opens after the save, not at
# iteration 1. Then --load of another layout, another model shape, a truncated
# file and a damaged one must each be refused: exit 2, one line naming the file, nothing written. And the save on the
# duration exit, between log points, continued in a new process.
set -u
LG=$1 MPIEXEC=$2
W=$(mktemp -d /tmp/loopgate-resume-XXXXXX)
trap 'rm -rf "$W"' EXIT
run() { "$MPIEXEC" -q -n 2 "$LG" run --fixture tp2sp --iters 12 --log-interval 2 "$@"; }
lines_after() { grep -o 'iteration  *[0-9]*/.*' "$1" | sed 's/elapsed time per iteration (ms): [0-9.]* |//' |
                awk -v k="$2" '{ split($2, a, "/"); if (a[1] + 0 > k) print }'; }
lines_after_6() { lines_after "$1" 6; }
fail=0
run --arm baseline --save "$W/ck" --exit-interval 6 > "$W/save.log" 2>&1 || { echo "FAIL the saving run"; cat "$W/save.log"; exit 1; }
[ "$(cat "$W/ck/latest_checkpointed_iteration.txt")" = 6 ] || { echo "FAIL the tracker does not name iteration 6"; exit 1; }
for arm in baseline zerosync; do
  run --arm "$arm" --trace "$W/full_$arm.json" > "$W/full_$arm.log" 2>&1 || { echo "FAIL $arm uninterrupted"; fail=1; }
  run --arm "$arm" --load "$W/ck" --trace "$W/resumed_$arm.json" > "$W/resumed_$arm.log" 2>&1 ||
    { echo "FAIL $arm resumed"; cat "$W/resumed_$arm.log"; fail=1; }
  # After 8 the windows must be the uninterrupted run's; at 8 (the first log point after the load) a lagged timer
  # previews its own window, as any process's first report does: it must open after the save, at 7.
  windows() { python3 -c 'import json, sys
recs = json.load(open(sys.argv[1]))["records"]
print(sorted({(r["rank"], r["iteration"], tuple(r["timer_window"])) for r in recs
              if r["iteration"] > 8 and r.get("timer_window", [0, 0])[0] > 0}))
print(sorted({r["timer_window"][0] for r in recs if r["iteration"] == 8 and r.get("timer_window", [0, 0])[0] > 0}))' "$1"; }
  if [ "$(windows "$W/full_$arm.json" | head -1)" != "$(windows "$W/resumed_$arm.json" | head -1)" ] ||
     [ "$(windows "$W/resumed_$arm.json" | tail -1)" != "[7]" ]; then
    echo "FAIL $arm resumed: its log points' timer windows are not the uninterrupted run's after 8, or the window at 8 does"
    echo "  not open at 7: uninterrupted $(windows "$W/full_$arm.json"); resumed $(windows "$W/resumed_$arm.json")"
    fail=1
  else
    echo "ok: $arm resumed times the uninterrupted run's windows after 6"
  fi
  n=$(lines_after_6 "$W/full_$arm.log" | wc -l)
  if [ "$n" -ne 3 ] || ! diff <(lines_after_6 "$W/full_$arm.log") <(lines_after_6 "$W/resumed_$arm.log"); then
    echo "FAIL $arm resumed from the baseline's checkpoint differs from $arm uninterrupted after iteration 6 ($n lines)"
    fail=1
  else
    echo "ok: $arm resumed in a new process prints the uninterrupted run's $n lines after iteration 6"
  fi
done
# The save on the duration exit (Megatron's checkpoint_and_decide_exit saves first): the simulated clock passes a
# minute within the run, the baseline's vote (every iteration) ends it between log points, and the tracker names
# that iteration; a new process continues it to the uninterrupted run's lines.
run --arm baseline --save "$W/ckd" --exit-duration-in-mins 1 --simulated-minutes-per-iteration 0.25 > "$W/dur.log" 2>&1 ||
  { echo "FAIL the run that exits on duration"; cat "$W/dur.log"; fail=1; }
k=$(cat "$W/ckd/latest_checkpointed_iteration.txt" 2>/dev/null)
if [ "$k" != 5 ]; then
  echo "FAIL the duration exit saved no checkpoint at 5 (the tracker names '${k:-nothing}')"; fail=1
else
  run --arm zerosync --load "$W/ckd" > "$W/resumed_dur.log" 2>&1 || { echo "FAIL zerosync from the duration save"; fail=1; }
  if [ "$(lines_after "$W/full_zerosync.log" 5 | wc -l)" -ne 4 ] ||
     ! diff <(lines_after "$W/full_zerosync.log" 5) <(lines_after "$W/resumed_dur.log" 5); then
    echo "FAIL zerosync resumed from the duration exit's save (at 5, between log points) differs after iteration 5"
    fail=1
  else
    echo "ok: the duration exit saved at 5, and zerosync continues it as uninterrupted"
  fi
fi
# refused WHAT PATTERN CMD...: CMD must exit 2 with one error line matching PATTERN (it names the file), and
# write nothing into the checkpoints.
refused() {
  local what=$1 pattern=$2 before rc lines
  shift 2
  before=$(find "$W/ck" "$W/ck2" -type f -printf '%p %s %T@\n' | sort)
  "$@" > "$W/refused.log" 2>&1
  rc=$?
  lines=$(grep -c "loopgate: error" "$W/refused.log")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q "loopgate: error: .*$pattern" "$W/refused.log"; then
    echo "FAIL $what: exit $rc, $lines error line(s); expected 2 and one line matching '$pattern':"
    cat "$W/refused.log"; fail=1
  elif [ "$before" != "$(find "$W/ck" "$W/ck2" -type f -printf '%p %s %T@\n' | sort)" ]; then
    echo "FAIL $what: refused, but the checkpoint folders changed"; fail=1
  else
    echo "ok: $what is refused: $(grep -m1 'loopgate: error' "$W/refused.log")"
  fi
}
cp -r "$W/ck" "$W/ck2"
# Another layout (tp2sp's 2 ranks into single's 1) and another model shape (a wider hidden size).
refused "another layout" "--load .*rank_00000.pt was saved by rank 0 of 2, this is rank 0 of 1" \
  "$MPIEXEC" -q -n 1 "$LG" run --fixture single --iters 12 --log-interval 2 --load "$W/ck"
refused "another model shape" "--load .*iteration 6 was saved with --hidden-size [0-9]*, this run has 128" \
  run --hidden-size 128 --load "$W/ck"
# A truncated file: rank 0's cut to half.
f="$W/ck2/iter_0000006/rank_00000.pt"
truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"
refused "a truncated file" "--load .*cannot read .*ck2/iter_0000006/rank_00000.pt" run --arm baseline --load "$W/ck2"
# A damaged file: one byte of rank 1's flipped.
f="$W/ck/iter_0000006/rank_00001.pt"
printf '\xff' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
refused "a damaged file" "--load .*rank_00001.pt" run --arm baseline --load "$W/ck"
exit $fail

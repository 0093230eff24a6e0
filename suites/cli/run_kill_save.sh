#!/usr/bin/env bash
# run_kill_save.sh LOOPGATE MPIEXEC: a process killed (-9) in the middle of a save leaves the previous checkpoint
# loadable, and the tracker never names a partial one. `loopgate run` saves at iterations 4 and 8. Before the save at
# 8 reaches it, one temporary name of that save is made a FIFO: opening it for writing blocks, so the writer stops
# exactly there, inside the save, on every machine. Three places: rank 0's file, rank 1's file, the tracker. Once the
# save has reached the FIFO (the other files of the save are there and the job is still running), the launcher and
# every rank are killed with -9. Then the tracker must still name 4, and a new run with --load continues from it
# (exit 0). A save that never opens the temporary name fails the test too: it would not have been written safely.
set -u
LG=$1 MPIEXEC=$2
W=$(mktemp -d /tmp/loopgate-killsave-XXXXXX)
trap 'pkill -9 -f -- "--save $W/" 2> /dev/null; rm -rf "$W"' EXIT
run() { "$MPIEXEC" -q -n 2 "$LG" run --fixture tp2sp --log-interval 2 "$@"; }
wait_for() { # wait_for SECONDS TEST...: until TEST holds, at most SECONDS; false if it never did
  local end=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.02; done
}
alive() { kill -0 "$pid" 2> /dev/null; }
fail=0
for place in rank_00000.pt rank_00001.pt tracker; do
  ck="$W/$place"
  it8="$ck/iter_0000008"
  tracker="$ck/latest_checkpointed_iteration.txt"
  mkdir -p "$it8"
  case $place in
    tracker) others=("$it8/rank_00000.pt" "$it8/rank_00001.pt") ;;
    rank_00000.pt) mkfifo "$it8/rank_00000.pt.tmp"; others=("$it8/rank_00001.pt") ;;
    rank_00001.pt) mkfifo "$it8/rank_00001.pt.tmp"; others=("$it8/rank_00000.pt") ;;
  esac
  run --iters 12 --save "$ck" --save-interval 4 > "$W/saving.log" 2>&1 &
  pid=$!
  # The tracker's temporary name serves every save: it becomes the FIFO once the save at 4 is done.
  if [ "$place" = tracker ]; then
    wait_for 60 grep -qx 4 "$tracker" 2> /dev/null && mkfifo "$tracker.tmp"
  fi
  reached() { for f in "${others[@]}"; do [ -f "$f" ] || return 1; done; ! alive || sleep 0.3; }
  if ! wait_for 60 reached; then
    echo "FAIL $place: the save at 8 never got there:"
    tail -5 "$W/saving.log"
    fail=1
    continue
  fi
  if ! alive || { [ "$place" != tracker ] && [ -e "$it8/$place" ]; }; then
    echo "FAIL $place: the save at 8 did not stop at the temporary name; it wrote the file without it"
    pkill -9 -f -- "--save $ck "
    fail=1
    continue
  fi
  pkill -9 -f -- "--save $ck " # the launcher and every rank: each names the folder
  wait "$pid" 2> /dev/null
  gone() { ! pgrep -f -- "--save $ck " > /dev/null; }
  wait_for 30 gone
  named=$(cat "$tracker" 2> /dev/null)
  if [ "$named" != 4 ]; then
    echo "FAIL $place: killed inside the save at 8, the tracker names '${named}', not the complete checkpoint 4"
    fail=1
  elif ! run --load "$ck" --iters 6 > "$W/load.log" 2>&1; then
    echo "FAIL $place: killed inside the save at 8, the checkpoint at 4 the tracker names does not load:"
    tail -5 "$W/load.log"
    fail=1
  else
    echo "ok: killed inside the save at 8 (blocked at $place), the tracker names 4, which loads and runs on to 6"
  fi
done
exit $fail

#!/usr/bin/env bash
# What a save and a load cost on the single fixture, arms alternating inside one run:
#   bash ci/checkpoint-cost.sh LOOPGATE [ROUNDS] [RUN ARGS...]     (e.g. ... 7 --device cuda)
# Save: each round runs 40 iterations at log interval 2 twice, saving at every log point (19 saves after the
# first) and not, in alternating order. A save lands inside the next log line's window, so it shows in that line's
# `elapsed time per iteration` (x2 iterations): the cost per save is 2 x (median elapsed with saves - median
# without), over the lines after the first two of every run. Load: each round times a process that loads the
# checkpoint at 40 and runs iterations 41-42 against one that runs 2 iterations from the start (the same work
# but the load, process start included, so it is the noisier figure).
set -euo pipefail
LG=$1 ROUNDS=${2:-7}
shift $(( $# >= 2 ? 2 : 1 ))
W=$(mktemp -d /tmp/loopgate-ckcost-XXXXXX)
trap 'rm -rf "$W"' EXIT
run() { "$LG" run --fixture single --log-interval 2 --lr-decay-iters 42 "$@"; }  # one schedule for 2 to 42
elapsed() { grep -o 'elapsed time per iteration (ms): [0-9.]*' "$1" | awk 'NR > 2 { print $NF }'; }
now() { date +%s.%N; }
: > "$W/save.ms"; : > "$W/nosave.ms"; : > "$W/load.s"; : > "$W/fresh.s"
for r in $(seq 1 "$ROUNDS"); do
  rm -rf "$W/ck"
  for arm in $( [ $((r % 2)) -eq 1 ] && echo "save nosave" || echo "nosave save"); do
    if [ "$arm" = save ]; then run --iters 40 --save "$W/ck" --save-interval 2 "$@" > "$W/run.log"
    else run --iters 40 "$@" > "$W/run.log"; fi
    elapsed "$W/run.log" >> "$W/$arm.ms"
  done
  for arm in $( [ $((r % 2)) -eq 1 ] && echo "load fresh" || echo "fresh load"); do
    t0=$(now)
    if [ "$arm" = load ]; then run --iters 42 --load "$W/ck" "$@" > /dev/null; else run --iters 2 "$@" > /dev/null; fi
    awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.4f\n", a - b }' >> "$W/$arm.s"
  done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms=$(median "$W/save.ms") mn=$(median "$W/nosave.ms") ls=$(median "$W/load.s") lf=$(median "$W/fresh.s")
echo "checkpoint cost, single, $ROUNDS rounds alternating ($*):"
echo "  elapsed per iteration, median of $(wc -l < "$W/save.ms") lines: with a save every 2 iterations $ms ms, without $mn ms"
echo "  a save: $(awk -v a="$ms" -v b="$mn" 'BEGIN { printf "%.2f", 2 * (a - b) }') ms"
echo "  a process that loads and runs 2 iterations: median $ls s; from the start, 2 iterations: $lf s"
echo "  a load (process difference): $(awk -v a="$ls" -v b="$lf" 'BEGIN { printf "%.0f", 1000 * (a - b) }') ms"
echo "  the checkpoint at 40: $(du -sk "$W/ck/iter_0000040" | cut -f1) KiB"

#!/usr/bin/env bash
# bad_input.sh LOOPGATE MPIEXEC SRC_DIR: runs every row of bad_input_table.sh against the real `loopgate` binary
# (under `MPIEXEC -q -n N` where the row says so) and asserts, per row: exit code 2; exactly one non-empty stderr
# line, starting "loopgate: error: " and holding the row's substring (the flag and the value); nothing on stdout
# (no log line, no "loopgate scenario:", no table: no work done); finished within LOOPGATE_BAD_INPUT_LIMIT_S
# seconds (default 10). After the table: golden/ byte for byte unchanged (hashed before and after) and the
# scratch folder holding nothing a refused command created. Exit 0 when every row passes, 1 otherwise.
# LOOPGATE_BAD_INPUT_ROWS=REGEX runs only the rows whose argv matches (while working on one check).
# `-q` keeps mpiexec's own "a process returned a non-zero exit code" notice off stderr: that is the launcher's
# line, not loopgate's.
set -u
LG=$1 MPIEXEC=$2 SRC=$3
LIMIT=${LOOPGATE_BAD_INPUT_LIMIT_S:-10}
EX=$SRC/docs/examples/megatron
WORK=$(mktemp -d /tmp/loopgate-bad-input-XXXXXX)
printf '#!/bin/sh\n' >"$WORK/mpiexec"  # a launcher that is not executable (mode 644)

tree_hash() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1); }
golden_before=$(tree_hash "$SRC/golden")
work_before=$(cd "$WORK" && find . | sort)

# The rows without ranks run through `loopgate --each-row` (tools/loopgate/each_row.h): one process loads LibTorch
# (~0.5 s of CPU, most of a row's time), then each row runs in a forked copy of it with its own exit code, stdout,
# stderr and time. The rows under mpiexec run as their own jobs, JOBS at a time (default 2). Results come back in row
# order.
JOBS=${LOOPGATE_BAD_INPUT_JOBS:-2}
RES=$(mktemp -d /tmp/loopgate-bad-input-results-XXXXXX)
trap 'rm -rf "$WORK" "$RES"' EXIT
rows=0
declare -a row_np row_expect row_args
one_rank=()  # the rows for --each-row, in order
row() {
  local np=$1 expect=$2
  shift 2
  [[ "$*" =~ ${LOOPGATE_BAD_INPUT_ROWS:-} ]] || return 0  # a developer's filter on the argv (a regex)
  rows=$((rows + 1))
  row_np[$rows]=$np row_expect[$rows]=$expect row_args[$rows]="$*"
  local -a envs=()
  while [[ "${1:-}" =~ ^[A-Z_]+= ]]; do envs+=("$1"); shift; done  # leading VAR=value words: the environment
  if [ "$np" -eq 0 ]; then
    : >"$RES/$rows.envs"  # NUL-terminated words (printf with no words would still write one empty field)
    : >"$RES/$rows.args"
    [ ${#envs[@]} -eq 0 ] || printf '%s\0' "${envs[@]}" >"$RES/$rows.envs"
    [ $# -eq 0 ] || printf '%s\0' "$@" >"$RES/$rows.args"
    one_rank+=("$rows")
    return 0
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  (
    start=$(date +%s%N)
    timeout -k 5 $((LIMIT * 3)) env "${envs[@]}" "$MPIEXEC" -q -n "$np" "$LG" "$@" >"$RES/$rows.out" 2>"$RES/$rows.err" </dev/null
    echo $? >"$RES/$rows.rc"
    echo $((($(date +%s%N) - start) / 1000000)) >"$RES/$rows.ms"
  ) &
}

# shellcheck source=bad_input_table.sh
source "$(dirname "$0")/bad_input_table.sh"
if [ ${#one_rank[@]} -gt 0 ]; then  # beside the mpiexec rows still running
  python3 - "$RES" "${one_rank[@]}" <<'PY' >"$RES/rows.json"
import json, sys
res, rows = sys.argv[1], sys.argv[2:]
def fields(path):
    return [f.decode() for f in open(path, "rb").read().split(b"\0")[:-1]]
out = []
for i in rows:
    env = dict(e.split("=", 1) for e in fields(f"{res}/{i}.envs"))
    out.append({"args": fields(f"{res}/{i}.args"), "env": env})
print(json.dumps(out))
PY
  "$LG" --each-row "$RES/rows.json" </dev/null >"$RES/each_row.txt"
  k=0
  for i in "${one_rank[@]}"; do
    read -r _ _ _ rc ms _ < <(grep "^row $k exit " "$RES/each_row.txt")
    echo "${rc:-1}" >"$RES/$i.rc"
    echo "${ms:-0}" >"$RES/$i.ms"
    cp "$RES/rows.json.$k.out" "$RES/$i.out" 2>/dev/null || : >"$RES/$i.out"
    cp "$RES/rows.json.$k.err" "$RES/$i.err" 2>/dev/null || echo "no row $k in --each-row's output" >"$RES/$i.err"
    k=$((k + 1))
  done
fi
wait

failed=0 slowest=0
results=()
for ((i = 1; i <= rows; i++)); do
  np=${row_np[$i]} expect=${row_expect[$i]} rc=$(cat "$RES/$i.rc") ms=$(cat "$RES/$i.ms")
  [ "$ms" -gt "$slowest" ] && slowest=$ms
  problems=()
  lines=$(grep -c . "$RES/$i.err")
  first=$(grep -m1 . "$RES/$i.err")
  [ "$rc" -eq 2 ] || problems+=("exit code $rc, expected 2")
  [ "$lines" -eq 1 ] || problems+=("$lines non-empty stderr lines, expected 1")
  [[ "$first" == "loopgate: error: "* ]] || problems+=("stderr does not start with 'loopgate: error: '")
  grep -qF -- "$expect" "$RES/$i.err" || problems+=("stderr lacks: $expect")
  [ ! -s "$RES/$i.out" ] || problems+=("stdout not empty ($(wc -l <"$RES/$i.out") lines: work was done)")
  [ "$ms" -le $((LIMIT * 1000)) ] || problems+=("took $ms ms, limit ${LIMIT} s")
  label="np $np"
  [ "$np" -gt 0 ] || label="    "
  if [ ${#problems[@]} -eq 0 ]; then
    results+=("$(printf 'ok   %3d %s %6d ms  loopgate %s' "$i" "$label" "$ms" "${row_args[$i]}")")
  else
    failed=$((failed + 1))
    results+=("$(printf 'FAIL %3d %s %6d ms  loopgate %s' "$i" "$label" "$ms" "${row_args[$i]}")")
    for p in "${problems[@]}"; do results+=("       $p"); done
    results+=("       stderr: $(head -c 600 "$RES/$i.err" | tr '\n' '|')")
    results+=("       stdout: $(head -c 300 "$RES/$i.out" | tr '\n' '|')")
  fi
done

printf '%s\n' "${results[@]}"
golden_after=$(tree_hash "$SRC/golden")
work_after=$(cd "$WORK" && find . | sort)
if [ "$golden_before" != "$golden_after" ]; then
  echo "FAIL golden/ changed during the table (sha256 of the tree $golden_before -> $golden_after)"
  failed=$((failed + 1))
fi
if [ "$work_before" != "$work_after" ]; then
  echo "FAIL a refused command left files behind in the scratch folder:"
  diff <(echo "$work_before") <(echo "$work_after") | sed 's/^/       /'
  failed=$((failed + 1))
fi
# The count docs/cli.md quotes is this table's (a row added or removed without the docs fails here).
if [ -z "${LOOPGATE_BAD_INPUT_ROWS:-}" ] && ! grep -q "($rows rows, " "$SRC/docs/cli.md"; then
  echo "FAIL docs/cli.md does not quote this table's count: '($rows rows, ...' (it says: $(grep -o '([0-9]* rows, ' "$SRC/docs/cli.md" | head -1))"
  failed=$((failed + 1))
fi
echo "bad input: $rows rows, $failed failed; golden/ unchanged: $([ "$golden_before" = "$golden_after" ] && echo yes || echo NO); slowest row $slowest ms (limit $LIMIT s)"
[ "$failed" -eq 0 ]

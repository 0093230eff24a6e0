#!/usr/bin/env bash
# Compares every golden_values*.json of a Megatron-LM checkout with itself (`loopgate compare --a F --b F`) and,
# for each resume file (*_2nd.json), with its first run's file. A file compared with itself must pass (exit 0) or
# be refused with one line saying what it is (exit 2: inference goldens, empty files); never exit 1.
#   tools/megatron_golden_sweep.sh LOOPGATE MEGATRON_CHECKOUT [OUT_DIR]
# Prints one line per refused file and per resume pair, then the counts; exit 1 if any self-comparison failed.
set -euo pipefail
loopgate=$1 megatron=$2 out=${3:-$(mktemp -d)}
mkdir -p "$out"
pass=0 fail=0 refused=0
declare -A why
while IFS= read -r -d '' f; do
  rel=${f#"$megatron"/}
  set +e
  "$loopgate" compare --a "$f" --b "$f" >"$out/self.out" 2>"$out/self.err"
  rc=$?
  set -e
  case $rc in
    0) pass=$((pass + 1)) ;;
    2) refused=$((refused + 1)); line=$(head -1 "$out/self.err"); why[${line#*: error: *: }]+=x
       echo "refused: $line" ;;
    *) fail=$((fail + 1)); echo "FAILED (exit $rc): $rel"; grep -m3 FAIL "$out/self.out" || true ;;
  esac
done < <(find "$megatron/tests/functional_tests/test_cases" -name 'golden_values*.json' -print0 | sort -z)
resume_pass=0 resume_fail=0
while IFS= read -r -d '' second; do
  first=${second%_2nd.json}.json
  [ -f "$first" ] || continue
  set +e
  "$loopgate" compare --a "$first" --b "$second" >"$out/resume.out" 2>&1
  rc=$?
  set -e
  [ $rc = 0 ] && resume_pass=$((resume_pass + 1)) || resume_fail=$((resume_fail + 1))
  echo "resume pair exit $rc: ${second#"$megatron"/}: $(grep -m1 '^lm loss' "$out/resume.out" | tr -s ' ')"
done < <(find "$megatron/tests/functional_tests/test_cases" -name 'golden_values*_2nd.json' -print0 | sort -z)
echo "self-comparison: $((pass + fail + refused)) files: $pass passed, $fail failed, $refused refused"
for w in "${!why[@]}"; do echo "  refused ${#why[$w]}: $w"; done
echo "resume files against their first runs: $resume_pass passed, $resume_fail failed"
[ $fail = 0 ]

#!/usr/bin/env bash
# Flake hunt: runs the CPU CTest suite N times on one build and says whether every run passed and whether the
# gates' golden values were bit-identical across runs.
#   bash ci/repeat.sh N [ctest args...]      e.g. bash ci/repeat.sh 20;  bash ci/repeat.sh 3 -L unit
# Builds once (the `cpu` preset; a no-op when up to date), then per run: `ctest --preset cpu --output-log`, the
# pass/fail counts, the failing tests, and from each gate_<fixture> test's output (CTest's LastTest.log, copied per
# run) the GoldenValues verdict and the digest of the baseline's golden values (fnv1a64 of
# golden_values_from_trace, printed by suites/lr_schedule.cpp). Logs of failing runs are kept (paths printed);
# passing runs keep only their golden lines. Exit 1 when any run
# failed or the golden digests differ between runs, 2 on bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-}
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "repeat: error: N must be a positive integer, got '${n}' (usage: ci/repeat.sh N [ctest args...])" >&2
  exit 2
fi
shift
export CCACHE_SLOPPINESS=pch_defines,time_macros
cmake --preset cpu >/dev/null && cmake --build --preset cpu >/dev/null || { echo "repeat: the build failed" >&2; exit 1; }

out=build/cpu/repeat/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
summary=()
any_failed=0
runs_failed=0
for i in $(seq 1 "$n"); do
  log=$out/run-$i.log
  start=$(date +%s)
  ctest --preset cpu --output-log "$log" "$@" >"$out/run-$i.stdout" 2>&1
  rc=$?
  full=$out/run-$i.full.log  # every test's whole output (--output-log has only what the console shows)
  cp build/cpu/Testing/Temporary/LastTest.log "$full" 2>/dev/null || : >"$full"
  secs=$(( $(date +%s) - start ))
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$out/run-$i.stdout" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$out/run-$i.stdout" | tail -1)
  total=${total:-0}; failed=${failed:-0}
  [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1   # ctest failed without a count line (e.g. no tests)
  grep -o 'golden values [a-z0-9]*: [a-zA-Z]*, digest [a-z0-9:]*' "$full" | sort >"$out/run-$i.golden"
  golden_ok=$(grep -c ': pass, digest' "$out/run-$i.golden")
  golden_all=$(wc -l <"$out/run-$i.golden")
  digest=$(sha256sum <"$out/run-$i.golden" | cut -c1-12)
  summary+=("$i $((total - failed)) $failed $secs $golden_ok/$golden_all $digest")
  if [ "$rc" -ne 0 ]; then
    any_failed=1
    runs_failed=$((runs_failed + 1))
    echo "repeat: run $i FAILED (exit $rc); logs: $log (console), $full (every test's output)"
    sed -n '/The following tests FAILED:/,$p' "$out/run-$i.stdout" | grep -v '^Errors while running' | sed 's/^/  /'
  else
    rm -f "$log" "$full"
  fi
  rm -f "$out/run-$i.stdout"
  echo "repeat: run $i/$n: $((total - failed)) passed, $failed failed, ${secs} s"
done

echo
printf '%-5s %-7s %-7s %-8s %-13s %s\n' run passed failed seconds golden_pass golden_digest
for row in "${summary[@]}"; do
  read -r i p f s g d <<<"$row"
  printf '%-5s %-7s %-7s %-8s %-13s %s\n' "$i" "$p" "$f" "$s" "$g" "$d"
done
echo
distinct=$(for i in $(seq 1 "$n"); do sha256sum <"$out/run-$i.golden"; done | sort -u | wc -l)
lines=$(wc -l <"$out/run-1.golden")
if [ "$lines" -eq 0 ]; then
  echo "repeat: no golden values line in any run (the gate suites did not run: check the ctest filter)"
elif [ "$distinct" -eq 1 ]; then
  echo "repeat: golden values bit-identical across all $n runs ($lines fixtures):"
  sed 's/^/  /' "$out/run-1.golden"
else
  echo "repeat: golden values DIFFER between runs ($distinct distinct digest sets); per run: $out/run-*.golden"
  any_failed=1
fi
echo "repeat: logs in $out"
echo "repeat: $n runs, $runs_failed failed"
exit "$any_failed"

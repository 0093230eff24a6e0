#!/usr/bin/env bash
# ci/bench-compare.sh: Google Benchmark's own compare.py on loopgate_bench JSON (docs/bench.md).
#   ci/bench-compare.sh [compare.py options] A.json B.json              two runs, paired by benchmark name
#   ci/bench-compare.sh [compare.py options] --filters F.json ARM_A ARM_B
#                                                  two arms inside one run (e.g. step/.../baseline vs .../onesync)
# compare.py gives the relative change of time and CPU time per benchmark and, with --benchmark_repetitions >= 2
# on both sides, a Mann-Whitney U test (9 or more repetitions advised). `-d OUT.json` also writes its comparison
# as JSON. loopgate adds no statistics here; `loopgate ab --arms` has its own, for arms alternating in one process.
#
# compare.py: $GBENCH_COMPARE, else Debian's libbenchmark-tools (/usr/share/benchmark/compare.py, installed by
# ci/deps-cpu.sh), else tools/compare.py of a google/benchmark checkout at $BENCHMARK_SRC. It needs python3 with
# numpy and scipy (Debian: python3-numpy python3-scipy, found through /usr/bin/python3 when the python3 on PATH
# lacks them).
# Exit: compare.py's, or 2 when it cannot run (no file, no compare.py, no numpy/scipy), with one line saying why.
set -uo pipefail

die2() {
  echo "ci/bench-compare.sh: $*" >&2
  exit 2
}

opts=()
while [ $# -gt 0 ] && [ "$1" != --filters ] && [[ "$1" == -* ]]; do
  case "$1" in
    -d|--dump_to_json|--alpha) [ $# -ge 2 ] || die2 "$1 needs a value"; opts+=("$1" "$2"); shift 2 ;;
    *) opts+=("$1"); shift ;;
  esac
done
if [ "${1:-}" = --filters ]; then
  [ $# -eq 4 ] || die2 "usage: ci/bench-compare.sh [options] --filters F.json ARM_A ARM_B"
  files=("$2")
  mode=(filters "$2" "$3" "$4")
else
  [ $# -eq 2 ] || die2 "usage: ci/bench-compare.sh [options] A.json B.json (or --filters F.json ARM_A ARM_B)"
  files=("$1" "$2")
  mode=(benchmarks "$1" "$2")
fi
for f in "${files[@]}"; do
  [ -r "$f" ] || die2 "$f: cannot read the file"
done

compare="${GBENCH_COMPARE:-}"
if [ -z "$compare" ]; then
  for c in /usr/share/benchmark/compare.py "${BENCHMARK_SRC:-/nonexistent}/tools/compare.py"; do
    if [ -r "$c" ]; then
      compare=$c
      break
    fi
  done
fi
[ -n "$compare" ] && [ -r "$compare" ] ||
  die2 "Google Benchmark's compare.py is not installed: apt-get install libbenchmark-tools (or set GBENCH_COMPARE)"
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy, scipy' 2>/dev/null; then
    py=$p
    break
  fi
done
[ -n "$py" ] || die2 "$compare needs python3 with numpy and scipy (apt-get install python3-numpy python3-scipy)"

exec "$py" "$compare" --no-color "${opts[@]}" "${mode[@]}"

#!/usr/bin/env bash
# ci/bench-compare.sh A.json B.json [compare.py options]: Google Benchmark's own tools/compare.py on two
# loopgate_bench JSON files (docs/bench.md): it pairs the runs by name and prints the relative change of time
# and CPU time; with --benchmark_repetitions >= 2 on both sides, a Mann-Whitney U test per benchmark. loopgate
# writes no statistics of its own here (`loopgate ab --arms` has them, for arms alternating in one process).
#
# compare.py is not packaged by Debian (libbenchmark-dev ships no tools/) nor on PyPI as a command. Point
# GBENCH_COMPARE at tools/compare.py of a google/benchmark checkout (the tag matching the library, v1.7.1 here);
# it needs python3 with numpy and scipy:
#   git clone --depth 1 -b v1.7.1 https://github.com/google/benchmark /opt/gbench
#   python3 -m pip install numpy scipy
#   GBENCH_COMPARE=/opt/gbench/tools/compare.py ci/bench-compare.sh base.json cand.json
# Exit: compare.py's, or 2 when it cannot run (no file, no compare.py, no numpy/scipy), with one line saying why.
set -uo pipefail

die2() {
  echo "ci/bench-compare.sh: $*" >&2
  exit 2
}

[ $# -ge 2 ] || die2 "usage: ci/bench-compare.sh A.json B.json [compare.py options]"
a=$1 b=$2
shift 2
for f in "$a" "$b"; do
  [ -r "$f" ] || die2 "$f: cannot read the file"
done

compare="${GBENCH_COMPARE:-}"
if [ -z "$compare" ]; then
  for c in "${BENCHMARK_SRC:-/nonexistent}/tools/compare.py" /usr/share/benchmark/tools/compare.py \
           /usr/local/share/benchmark/tools/compare.py; do
    if [ -r "$c" ]; then
      compare=$c
      break
    fi
  done
fi
[ -n "$compare" ] && [ -r "$compare" ] ||
  die2 "Google Benchmark's tools/compare.py is not installed (not in libbenchmark-dev); set GBENCH_COMPARE to a checkout's tools/compare.py (see the comment at the top of this script)"
python3 -c 'import numpy, scipy' 2>/dev/null ||
  die2 "$compare needs python3 with numpy and scipy (python3 -m pip install numpy scipy)"

exec python3 "$compare" "$@" benchmarks "$a" "$b"

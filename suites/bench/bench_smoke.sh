#!/usr/bin/env bash
# bench_smoke: loopgate_bench on one CPU rank, the four arms on the tiny single fixture (a window of 2 iterations,
# 3 timed windows), JSON out, then check_bench_json.py on it.
#   bench_smoke.sh MPIEXEC LOOPGATE_BENCH CHECK_SCRIPT OUT_JSON
set -euo pipefail
mpiexec=$1 bench=$2 check=$3 out=$4
rm -f "$out"
"$mpiexec" -n 1 "$bench" --fixture single --configs launch-bound --log-interval 2 --windows 3 --warmup-windows 1 \
  --benchmark_min_time=0.01 --benchmark_out="$out" --benchmark_out_format=json
python3 "$check" "$out"

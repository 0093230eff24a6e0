#!/usr/bin/env bash
# bench_compare: Google Benchmark's compare.py (through ci/bench-compare.sh) on loopgate_bench's JSON.
#   bench_compare.sh MPIEXEC LOOPGATE_BENCH BENCH_COMPARE_SH OUT_DIR
# 1. baseline and zerosync on the tiny single fixture, 3 repetitions each, JSON out; compare.py's filters mode
#    pairs the two arms: its JSON must hold one row per repetition and a U test.
# 2. The same JSON with each zerosync repetition's time set to 3 x the baseline's: compare.py must report exactly
#    +2.0 (200 % slower) on every row, so the time it compares is the per-iteration time loopgate_bench reports.
set -euo pipefail
mpiexec=$1 bench=$2 compare=$3 out=$4
mkdir -p "$out"
"$mpiexec" -n 1 "$bench" --fixture single --configs launch-bound --arms baseline,zerosync --log-interval 2 \
  --windows 3 --warmup-windows 1 --benchmark_filter='^step/' --benchmark_repetitions=3 \
  --benchmark_out="$out/reps.json" --benchmark_out_format=json > "$out/bench.txt"
bash "$compare" -d "$out/diff.json" --filters "$out/reps.json" baseline zerosync
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
runs = json.load(open(f"{out}/reps.json"))
def reps(arm):
    return {b["repetition_index"]: b for b in runs["benchmarks"]
            if b["run_type"] == "iteration" and b["name"].endswith(f"/{arm}/iterations:3/manual_time")}
base, zero = reps("baseline"), reps("zerosync")
assert sorted(base) == sorted(zero) == [0, 1, 2], f"repetitions: baseline {sorted(base)}, zerosync {sorted(zero)}"
for i, b in zero.items():
    b["real_time"] = 3 * base[i]["real_time"]
    b["cpu_time"] = 3 * base[i]["cpu_time"]
json.dump(runs, open(f"{out}/planted.json", "w"))
PY
bash "$compare" -d "$out/planted_diff.json" --filters "$out/planted.json" baseline zerosync > /dev/null
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def rows(path):
    diff = json.load(open(path))
    pair = [d for d in diff if "[baseline vs. zerosync]" in d["name"] and d.get("run_type") != "aggregate"]
    assert len(pair) == 1, f"{path}: want one baseline-vs-zerosync entry, got {[d['name'] for d in diff]}"
    return pair[0]
p = rows(f"{out}/diff.json")
assert len(p["measurements"]) == 3, f"3 repetitions, got {len(p['measurements'])}"
assert p.get("utest", {}).get("time_pvalue") is not None, "compare.py ran no U test"
q = rows(f"{out}/planted_diff.json")
times = [m["time"] for m in q["measurements"]]
assert all(abs(t - 2.0) < 1e-9 for t in times), f"zerosync at 3 x baseline: want +2.0 on every row, got {times}"
print(f"bench_compare: compare.py paired baseline and zerosync over 3 repetitions (U test p = "
      f"{p['utest']['time_pvalue']:.3f}); zerosync planted at 3 x baseline read as {times}")
PY

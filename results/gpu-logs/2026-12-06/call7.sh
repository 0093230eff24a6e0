#!/usr/bin/env bash
# Device call 7 of 2026-12-06 (one GPU): the counter writing its table through the shared definition
# (trainer/measure/sync_table_file.h): one counted run of Megatron-LM (`bash ci/megatron-syncs.sh`), and its table's
# keys and totals against call 5's table, written before that change.
source ci/device-steps.sh call7.tgz
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
step counted bash ci/megatron-syncs.sh .megatron "$OUT/s"
compare() {
  python3 - "$OUT/s/syncs-run.json" results/gpu-logs/2026-12-06/call5_overhead_ab_table.json <<'PY'
import json, sys
def proc(path):
    j = json.load(open(path))
    return j["processes"][0] if "processes" in j else j
new, old = proc(sys.argv[1]), proc(sys.argv[2])
print("process keys: new", sorted(new), "old", sorted(old), "equal:", sorted(new) == sorted(old))
rk = lambda p: sorted({k for s in p["sites"] for k in s})
print("site row keys: new", rk(new), "old", rk(old), "equal:", rk(new) == rk(old))
rows = lambda p: sorted((s["site"], s["kind"]) for s in p["sites"])
print("rows:", len(new["sites"]), "vs", len(old["sites"]), "same (site, kind) rows:", rows(new) == rows(old))
for p, name in ((new, "new"), (old, "old")):
    it = {}
    for s in p["sites"]:
        for k, v in s["per_iteration"].items(): it[k] = it.get(k, 0) + v
    print(name, "syncs per counted iteration:", sorted(set(it.values())))
PY
}
step compare compare
cp "$OUT/s/syncs-run.json" "$L/syncs-run.json"

#!/usr/bin/env bash
# Is a plain GPU run reproducible? Two plain baseline runs in two processes (ITERS iterations, log interval 1,
# Traces compared by `loopgate compare` and field by field, parameter checksums included). The GPU tier always
# runs with LibTorch's deterministic algorithms on and cuBLAS's workspace fixed (fixtures.cpp make_run_groups; an
# op without a deterministic form would throw, naming itself). The 2048x8x1024 `num zeros` question.
# Logs in $RESULTS/determinism (default build/gpu/results).
#   SIZE=2048x8x1024 ITERS=60 ci/gpu-determinism.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-env.sh
lg_results determinism
model=($(lg_model_flags "${SIZE:-2048x8x1024}"))
n=${ITERS:-60}
for i in 1 2; do
  start=$(date +%s)
  timeout 300 mpirun -np 1 $LG run --fixture single --device cuda --iters $n --log-interval 1 "${model[@]}" \
    --trace "$R/plain_$i.json" > "$R/plain_$i.log" 2>&1
  echo "plain_$i: exit $?, $(( $(date +%s) - start )) s"
done
$LG compare --a "$R/plain_1.json" --b "$R/plain_2.json" > "$R/compare.log" 2>&1
echo "compare: exit $?"
python3 - "$R/plain_1.json" "$R/plain_2.json" <<'PY' | tee "$R/fields.txt"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
rb = {(r["iteration"], r["rank"]): r for r in b["records"]}
fields = ["lm_loss", "grad_norm", "num_zeros", "params_norm", "learning_rate", "param_checksum_after"]
diff = [(r["iteration"], f) for r in a["records"] for f in fields if r.get(f) != rb.get((r["iteration"], r["rank"]), {}).get(f)]
print(f"{len(a['records'])} records, fields {', '.join(fields)}: {len(diff)} difference(s) {diff[:5]}")
PY

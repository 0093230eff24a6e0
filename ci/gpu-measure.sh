#!/usr/bin/env bash
# The measurements behind results/history/results-gpu-log.md, on a GPU machine (one or two GPUs), after ci/gpu.sh's build
# (or with BUILD=1, which configures and builds only the targets used here). Results go to $RESULTS
# (default build/gpu/results): one log per step.
set -uo pipefail
cd "$(dirname "$0")/.."
R="${RESULTS:-build/gpu/results}"
mkdir -p "$R"
source ci/gpu-env.sh
export PYTHONUNBUFFERED=1
B=build/gpu
LG=$B/tools/loopgate
source ci/gpu-select.sh
ngpu="$(lg_gpu_count)"  # CUDA_VISIBLE_DEVICES when set, else nvidia-smi -L's GPU lines

if [ "${BUILD:-0}" = 1 ]; then
  RESULTS="$R" bash ci/gpu-build.sh loopgate loopgate_gpu_unit loopgate_gpu_comm loopgate_sync_inject \
    loopgate_nccl_smoke || exit 1
fi

# 1. The injection library on the PyTorch example (one GPU).
CUDA_INJECTION64_PATH=$PWD/$B/tools/cupti/libloopgate_sync_inject.so LOOPGATE_CUPTI_ROI=roi \
  LOOPGATE_CUPTI_ITER=iteration LOOPGATE_CUPTI_CSV="$R/example_sync_sites.csv" \
  timeout 120 python3 tools/cupti/example_sync_sites.py > "$R/example_sync_sites.log" 2>&1

# 2. The in-process counter's tests (ledger == CUPTI, pageable stall) and the NCCL tests on one rank.
timeout 120 mpirun -np 1 $B/suites/gpu/loopgate_gpu_unit > "$R/gpu_unit.log" 2>&1
timeout 120 mpirun -np 1 $B/suites/gpu/loopgate_gpu_comm > "$R/gpu_comm_np1.log" 2>&1

# 3. Per-site sync table of every arm, fixture single, ledger beside CUPTI, log interval 1 and 20.
for li in 1 20; do
  for arm in baseline syncfree-1 syncfree-2 syncfree-3 syncfree-4 syncfree-5 syncfree onesync; do
    echo "=== arm $arm log-interval $li ==="
    timeout 90 mpirun -np 1 $LG run --fixture single --arm $arm --device cuda --cupti --syncs --quiet \
      --iters 20 --log-interval $li 2>&1
  done
done > "$R/single_syncs.log" 2>&1

# 4. Two GPUs: NCCL smoke, NCCL tests, and tp2sp / pp2 equivalence (iterations 1-2, exact bits).
if [ "$ngpu" -ge 2 ]; then
  {
    timeout 60 mpirun -np 2 $B/tools/loopgate_nccl_smoke
    timeout 120 mpirun -np 2 $B/suites/gpu/loopgate_gpu_comm
  } > "$R/nccl_np2.log" 2>&1
  for fx in tp2sp pp2; do
    for arm in baseline syncfree onesync; do
      timeout 120 mpirun -np 2 $LG run --fixture $fx --arm $arm --device cuda --iters 4 --log-interval 1 \
        --trace "$R/trace_${fx}_${arm}.json" 2>&1 | tail -4
    done
  done > "$R/equivalence_runs.log" 2>&1
  python3 - "$R" > "$R/equivalence.txt" 2>&1 <<'PY'
import json, sys, os
R = sys.argv[1]
def load(fx, arm):
    p = f"{R}/trace_{fx}_{arm}.json"
    if not os.path.exists(p): return None
    t = json.load(open(p))
    return {(r["iteration"], r["rank"]): (r["lm_loss"], r["params_norm"]) for r in t["records"]}
for fx in ["tp2sp", "pp2"]:
    base = load(fx, "baseline")
    if base is None: print(f"{fx}: no baseline trace"); continue
    for arm in ["syncfree", "onesync"]:
        cand = load(fx, arm)
        if cand is None: print(f"{fx} {arm}: no trace"); continue
        diffs = [k for k in base if k[0] <= 2 and base[k] != cand.get(k)]
        print(f"{fx} baseline vs {arm}: {len(base)} (iteration, rank) records, lm loss + params norm "
              f"{'bit-identical' if not diffs else 'DIFFER'}")
        for k in sorted(k for k in base if k[0] <= 2):
            print(f"   it {k[0]} rank {k[1]}: lm_loss {base[k][0]} vs {cand.get(k, ('-','-'))[0]}; "
                  f"params_norm {base[k][1]} vs {cand.get(k, ('-','-'))[1]}")
PY
fi
# 5. The CTest registration: ctest -L gpu with one GPU per rank through the resource spec.
if [ "$ngpu" -ge 2 ]; then
  timeout 240 ctest --test-dir $B -L gpu --resource-spec-file "$PWD/ci/gpu-resources.json" -j 2 --output-on-failure \
    > "$R/ctest_gpu.log" 2>&1
fi
echo "gpu-measure: done ($ngpu GPU(s)); results in $R"

#!/usr/bin/env bash
# Real Megatron-LM on one GPU under `loopgate syncs`: the host syncs per iteration per Python site, and the
# counter's overhead as alternating runs (plain, counted, plain, counted, ...) of the same job.
#   bash ci/megatron-syncs.sh MEGATRON_CHECKOUT OUT_DIR [ROUNDS]     (ROUNDS alternating pairs, default 0)
#   bash ci/megatron-syncs.sh MEGATRON_CHECKOUT OUT_DIR ab          (the overhead as an A/B inside one run: AB_ITERS
#                                                                    iterations, default 80, from the 3rd alternating
#                                                                    counted and uncounted: loopgate syncs --overhead-ab)
#   bash ci/megatron-syncs.sh MEGATRON_CHECKOUT OUT_DIR flags       (the flag-gated syncs: one counted run with this
#                                                                    script's flags, then one per flag below, each
#                                                                    diffed against it over iterations 11-25, which
#                                                                    hold the log point of --log-interval 20)
# MEGATRON_CHECKOUT holds megatron/ and pretrain_gpt.py (docs/megatron.md: how to get one). The model is small
# (4 layers x 512, sequence 1024, global batch 16, 30 iterations) and runs with PyTorch alone: no Transformer
# Engine, no Apex. MEGATRON_EXTRA_ARGS adds flags (e.g. "--log-interval 20"); LOOPGATE is the loopgate to use
# (default build/gpu/tools/loopgate); SYNC_ITERS the counted iterations (default 10-15).
set -euo pipefail
cd "$(dirname "$0")/.."
M=$(realpath "$1") OUT=$(realpath -m "$2") ROUNDS=${3:-0}
LG=$(realpath "${LOOPGATE:-build/gpu/tools/loopgate}")
mkdir -p "$OUT"
[ "$ROUNDS" != ab ] || export MEGATRON_ITERS=${AB_ITERS:-80}
source ci/megatron-env.sh
megatron_helpers "$M"
ARGS=("${MEGATRON_ARGS[@]}")
plain() { (cd "$M" && timeout "${RUN_TIMEOUT:-180}" python3 pretrain_gpt.py "${ARGS[@]}") > "$1" 2>&1 || echo "plain run $1: exit $?"; }
counted() {
  (cd "$M" && "$LG" syncs --iters "${SYNC_ITERS:-10-15}" --out-dir "$OUT/tables-$2" --json "$OUT/syncs-$2.json" \
      -- timeout "${RUN_TIMEOUT:-180}" python3 pretrain_gpt.py "${ARGS[@]}") > "$1" 2>&1
}
if [ "$ROUNDS" = ab ]; then
  rc=0
  (cd "$M" && "$LG" syncs --overhead-ab --iters "3-$MEGATRON_ITERS" --out-dir "$OUT/tables-ab" --json "$OUT/syncs-ab.json" \
      -- timeout "${RUN_TIMEOUT:-300}" python3 pretrain_gpt.py "${ARGS[@]}") > "$OUT/ab.log" 2>&1 || rc=$?
  echo "megatron-syncs: overhead A/B run, exit $rc"
  grep -E "^counter overhead" "$OUT/ab.log" || tail -20 "$OUT/ab.log"
  exit $rc
fi
if [ "$ROUNDS" = flags ]; then
  export SYNC_ITERS=${SYNC_ITERS:-11-25}
  variants=("--log-interval 20" "--timing-log-level 1" "--timing-log-level 2" "--exit-signal-handler"
            "--exit-duration-in-mins 100000")
  counted "$OUT/flags-default.log" default || { echo "megatron-syncs: the run with the default flags failed"; tail -20 "$OUT/flags-default.log"; exit 1; }
  echo "megatron-syncs: the default flags (--log-interval 1, --timing-log-level 0) counted over iterations $SYNC_ITERS"
  rc=0
  for k in "${!variants[@]}"; do
    v=${variants[$k]}
    ARGS=("${MEGATRON_ARGS[@]}" $v)  # argparse keeps the last value of a flag given twice
    if counted "$OUT/flags-$k.log" "flag$k"; then
      echo "megatron-syncs: $v (A = the default flags, B = with it)"
      "$LG" syncs --diff "$OUT/syncs-default.json" "$OUT/syncs-flag$k.json" | tee "$OUT/flags-$k.diff.txt" | head -40
    else
      echo "megatron-syncs: $v: the run failed"; tail -20 "$OUT/flags-$k.log"; rc=1
    fi
  done
  exit $rc
fi
start=$(date +%s)
rc=0
counted "$OUT/counted.log" run || rc=$?
echo "megatron-syncs: counted run in $(( $(date +%s) - start )) s, exit $rc"
[ $rc = 0 ] || tail -30 "$OUT/counted.log"
sed -n '/^loopgate syncs:/,$p' "$OUT/counted.log" | grep -v "^ \[" | head -60
for r in $(seq 1 "$ROUNDS"); do
  plain "$OUT/plain-$r.log"
  counted "$OUT/counted-$r.log" "round$r" || echo "counted run $r: exit $?"
done
if [ "$ROUNDS" -gt 0 ]; then
  # Per run: the median elapsed ms per iteration over iterations 3-30 (the first two warm up).
  python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/overhead.txt"
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
pat = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration \(ms\): ([\d.]+)")
def med(path):
    v = [float(m.group(2)) for m in map(pat.search, open(path)) if m and int(m.group(1)) >= 3]
    return statistics.median(v), len(v)
p = [med(f"{out}/plain-{r}.log") for r in range(1, rounds + 1)]
c = [med(f"{out}/counted-{r}.log") for r in range(1, rounds + 1)]
for r in range(rounds):
    print(f"round {r+1}: plain {p[r][0]:.2f} ms/iter ({p[r][1]} its), counted {c[r][0]:.2f} ms/iter, ratio {c[r][0]/p[r][0]:.4f}")
mp, mc = statistics.median(x for x, _ in p), statistics.median(x for x, _ in c)
print(f"overhead: median of run medians plain {mp:.2f}, counted {mc:.2f} ms/iter: ratio {mc/mp:.4f} ({rounds} pairs, alternating)")
PY
  "$LG" compare --a "$OUT"/plain-*.log --b "$OUT"/counted-*.log > "$OUT/compare-plain-counted.txt" 2>&1 || true
  grep -E "^(lm loss|learning rate|nan|grad norm|step time|checks run)" "$OUT/compare-plain-counted.txt" || true
fi

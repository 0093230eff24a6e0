#!/usr/bin/env bash
# What loopgate's bookkeeping costs on a GPU (after a GPU build, e.g. ci/gpu-graph.sh with BUILD=1 STEPS="").
# `loopgate ab --arms A,A:bare`: arm A with the ledger counting and its level-1 timer events, alternating with the
# same arm with both off (TrainSession::run), in one process over one model; the ratio B/A and its interval is the
# overhead. One log per run in $RESULTS/overhead (default build/gpu/results).
#   ARMS="onesync baseline" LIS="20 1" PHASES=10 SIZES="64x4x32" ci/gpu-overhead.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-env.sh
lg_results overhead
for size in ${SIZES:-64x4x32}; do
  for arm in ${ARMS:-onesync baseline}; do
    for li in ${LIS:-20 1}; do
      w=$(( li == 1 ? 10 : li ))
      log="$R/ab_${arm}_bare_${size}_li${li}.log"
      start=$(date +%s)
      timeout 300 mpirun -np 1 $LG ab --fixture single --arms "$arm,$arm:bare" --device cuda --log-interval $li \
        --phases "${PHASES:-10}" --phase-iters $w $(lg_model_flags "$size") --json "${log%.log}.json" > "$log" 2>&1
      rc=$?
      echo -e "$arm\t$size\tli$li\texit $rc\t$(( $(date +%s) - start )) s\t$(grep -m1 'median ratio' "$log" | sed 's/.*median ratio/ratio/')"
    done
  done
done

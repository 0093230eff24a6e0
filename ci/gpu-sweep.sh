#!/usr/bin/env bash
# The step-time sweep on a GPU machine (after a GPU build, e.g. ci/gpu-graph.sh with BUILD=1 STEPS=""): `loopgate ab`
# baseline vs onesync over model sizes from launch-bound to compute-bound, at --log-interval 1 and 20, on one GPU
# (single) and, with two, tp2sp. One log per run in $RESULTS (default build/gpu/results/sweep); one line per run
# in $RESULTS/sweep.tsv (tools/sweep_plot.py turns the logs into the table and plot of docs/performance.md).
#   SIZES="64x4x32 1024x8x1024" LIS="1" FIXTURES="single" ARMS=baseline,onesync ci/gpu-sweep.sh
# A size is HIDDENxLAYERSxSEQ; heads = hidden / 64 (at least 4). PROFILE=1 adds --profile (launch starvation).
# PHASES per arm (default 6: 5 v 5 samples, smallest exact two-sided p 0.0079; 8 gives 7 v 7, p down to 0.0006).
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-env.sh
lg_results sweep
source ci/gpu-select.sh
ngpu="$(lg_gpu_count)"
sizes="${SIZES:-64x4x32 512x8x512 1024x8x1024 2048x4x1024 2048x8x1024}"
lis="${LIS:-1 20}"
fixtures="${FIXTURES:-single tp2sp}"
arms="${ARMS:-baseline,onesync}"
prof=()
[ "${PROFILE:-0}" = 1 ] && prof=(--profile)

for fx in $fixtures; do
  np=1
  [ "$fx" = single ] || np=2
  [ "$np" -le "$ngpu" ] || { echo "$fx: needs $np GPUs, this machine has $ngpu: left out"; continue; }
  for size in $sizes; do
    for li in $lis; do
      w=$(( li == 1 ? 10 : li ))
      log="$R/ab_${fx}_${size}_li${li}${PHASES:+_p$PHASES}.log"
      start=$(date +%s)
      timeout 300 mpirun -np $np $LG ab --fixture $fx --arms "$arms" --device cuda --log-interval $li --phases "${PHASES:-6}" \
        --phase-iters $w $(lg_model_flags "$size") \
        "${prof[@]}" > "$log" 2>&1
      rc=$?
      echo -e "$fx\t$size\t$li\t$rc\t$(( $(date +%s) - start ))\t$(grep -m1 'median ratio' "$log" | sed 's/.*median ratio/ratio/')" |
        tee -a "$R/sweep.tsv"
    done
  done
done

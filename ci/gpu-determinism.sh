#!/usr/bin/env bash
# Issue 13's open finding: at 2048x8x1024 `ab` saw `num zeros` differ by +-1 between the alternating run and arm A
# alone. Is a plain run reproducible at all? Two plain baseline runs (ITERS iterations, log interval 1, Traces
# compared by `loopgate compare`), then the same under --deterministic-mode (LibTorch's deterministic algorithms: an
# op without one fails the run, naming it), then `ab` baseline,onesync under --deterministic-mode.
# Logs in $RESULTS/determinism (default build/gpu/results). ci/gpu-env.sh already fixes cuBLAS's workspace and NCCL.
#   SIZE=2048x8x1024 ITERS=60 ci/gpu-determinism.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R="${RESULTS:-build/gpu/results}/determinism"
mkdir -p "$R"
source ci/gpu-env.sh
LG=build/gpu/tools/loopgate
IFS=x read -r h l s <<< "${SIZE:-2048x8x1024}"
model=(--hidden-size $h --num-layers $l --seq-length $s --num-attention-heads $(( h / 64 > 4 ? h / 64 : 4 )))
n=${ITERS:-60}
note() { echo "$1: exit $2, $3 s; $(grep -m1 -E "$4" "$R/$1.log" | cut -c1-220)"; }
for mode in plain deterministic; do
  det=()
  [ $mode = deterministic ] && det=(--deterministic-mode)
  for i in 1 2; do
    start=$(date +%s)
    timeout 200 mpirun -np 1 $LG run --fixture single --device cuda --iters $n --log-interval 1 "${model[@]}" "${det[@]}" \
      --trace "$R/${mode}_$i.json" > "$R/${mode}_$i.log" 2>&1
    note "${mode}_$i" $? $(( $(date +%s) - start )) "error|iteration +$n/"
  done
  $LG compare --a "$R/${mode}_1.json" --b "$R/${mode}_2.json" > "$R/${mode}_compare.log" 2>&1
  note "${mode}_compare" $? 0 "verdict|PASS|FAIL"
  grep -E "num_zeros|differ" "$R/${mode}_compare.log" | head -5
done
start=$(date +%s)
timeout 300 mpirun -np 1 $LG ab --fixture single --arms baseline,onesync --device cuda --log-interval 1 --phases 6 \
  --phase-iters 10 "${model[@]}" --deterministic-mode > "$R/ab_deterministic.log" 2>&1
note ab_deterministic $? $(( $(date +%s) - start )) "median ratio|error"
grep -m1 "bit identity" "$R/ab_deterministic.log"

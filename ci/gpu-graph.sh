#!/usr/bin/env bash
# Measurements on a GPU machine (one or two GPUs): zerosync and `--cuda-graph iteration`, CUPTI launch
# counts, and `loopgate ab` step times. Results go to $RESULTS (default build/gpu/results), one log per step.
#   BUILD=1 LOOPGATE_VENDOR_DIR=$PWD/.vendor ci/gpu-graph.sh       # build, then every step
#   STEPS="unit launches" ci/gpu-graph.sh                            # some steps (after a build)
# unit: the CUPTI counter's tests (launch counting included). graph: the cuda_graph gate (real replays) on single,
# and on tp2sp and pp2 with two GPUs. launches: ledger == CUPTI and stream work per iteration for zerosync, onesync
# and syncfree against the baseline, and the planted extra launches. cupti: per-site CUPTI tables (kernels, graph
# launches) of baseline, zerosync and zerosync + graph over 40 iterations. bad: GPU-only bad input.
# ab: baseline vs zerosync + graph and onesync vs zerosync + graph, log interval 20, the default model and hidden
# 256 x 8 layers, one GPU (single) and two (tp2sp); the arms alternate in one process (tools/loopgate/ab_phases.cpp).
set -uo pipefail
cd "$(dirname "$0")/.."
R="${RESULTS:-build/gpu/results}"
mkdir -p "$R"
source ci/gpu-env.sh
export GTEST_COLOR=no
B=build/gpu
LG=$B/tools/loopgate
source ci/gpu-select.sh
ngpu="$(lg_gpu_count)"
steps="${STEPS-unit graph launches cupti live profile bench bad ab}"  # STEPS="" (set, empty): build only

if [ "${BUILD:-0}" = 1 ]; then
  RESULTS="$R" bash ci/gpu-build.sh loopgate loopgate_gates loopgate_gpu_loop loopgate_gpu_unit loopgate_bench || exit 1
fi

# step NAME LIMIT CMD...: one command, its log in $R/NAME.log, one summary line.
step() {
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]' "$R/$name.log" | head -2 | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z]|^launches rank 0' "$R/$name.log" | sort -u | head -40
}

has() { [[ " $steps " == *" $1 "* ]]; }
has unit && step gpu_unit 120 mpirun -np 1 $B/suites/gpu/loopgate_gpu_unit
if has graph; then
  step cuda_graph_single 300 mpirun -np 1 $B/suites/loopgate_gates --lg_fixture=single --lg_device=cuda \
    --lg_timeout=240 '--gtest_filter=*CudaGraph*'
  if [ "$ngpu" -ge 2 ]; then
    for fx in tp2sp pp2; do
      step cuda_graph_$fx 300 mpirun -np 2 $B/suites/loopgate_gates --lg_fixture=$fx --lg_device=cuda \
        --lg_timeout=240 '--gtest_filter=*CudaGraph*'
    done
  fi
fi
if has launches; then
  LF='--gtest_filter=Arms/LedgerEqualsCupti.*/zerosync:Arms/LedgerEqualsCupti.*/onesync:Arms/LedgerEqualsCupti.*/syncfree:Arms/LedgerEqualsCupti.NoMore*:LedgerEqualsCupti.LaunchCount*:LedgerEqualsCupti.Zerosync*'
  step launches_single 300 mpirun -np 1 $B/suites/gpu/loopgate_gpu_loop --lg_fixture=single --lg_timeout=240 "$LF"
  if [ "$ngpu" -ge 2 ]; then
    for fx in tp2sp pp2; do
      step launches_$fx 300 mpirun -np 2 $B/suites/gpu/loopgate_gpu_loop --lg_fixture=$fx --lg_timeout=240 "$LF"
    done
  fi
fi
if has cupti; then
  for arm in baseline zerosync; do
    step cupti_${arm}_li20 120 mpirun -np 1 $LG run --fixture single --arm $arm --device cuda --cupti --syncs --quiet \
      --iters 40 --log-interval 20
  done
  step cupti_zerosync_graph_li20 120 mpirun -np 1 $LG run --fixture single --arm zerosync --device cuda \
    --cuda-graph iteration --cupti --syncs --quiet --iters 40 --log-interval 20
  if [ "$ngpu" -ge 2 ]; then
    # Two GPUs: zerosync eager and with the graph on tp2sp and pp2 (0 syncs per non-log iteration, every rank).
    for fx in tp2sp pp2; do
      step cupti_${fx}_zerosync_li20 180 mpirun -np 2 $LG run --fixture $fx --arm zerosync --device cuda --cupti \
        --syncs --quiet --iters 40 --log-interval 20
      step cupti_${fx}_zerosync_graph_li20 180 mpirun -np 2 $LG run --fixture $fx --arm zerosync --device cuda \
        --cuda-graph iteration --cupti --syncs --quiet --iters 40 --log-interval 20
    done
  fi
fi

if has ab; then
  AB=(--device cuda --cuda-graph iteration --log-interval 20 --phases 5 --phase-iters 20)
  big=(--hidden-size 256 --num-layers 8)
  step ab_single_base_zero 200 mpirun -np 1 $LG ab --fixture single --arms baseline,zerosync "${AB[@]}"
  step ab_single_one_zero 200 mpirun -np 1 $LG ab --fixture single --arms onesync,zerosync "${AB[@]}"
  step ab_single256x8_base_zero 300 mpirun -np 1 $LG ab --fixture single --arms baseline,zerosync "${AB[@]}" "${big[@]}"
  step ab_single256x8_one_zero 300 mpirun -np 1 $LG ab --fixture single --arms onesync,zerosync "${AB[@]}" "${big[@]}"
  if [ "$ngpu" -ge 2 ]; then
    step ab_tp2sp_base_zero 300 mpirun -np 2 $LG ab --fixture tp2sp --arms baseline,zerosync "${AB[@]}"
    step ab_tp2sp256x8_base_zero 300 mpirun -np 2 $LG ab --fixture tp2sp --arms baseline,zerosync "${AB[@]}" "${big[@]}"
  fi
  for f in "$R"/ab_*.log; do
    echo "=== $(basename "$f")"
    grep -vE '^ *\[|^\s*$' "$f" | tail -25
  done
fi

if has live; then
  # Again: each log line stamped by the reader as it arrives (live, not at the end), and
  # the elapsed time per iteration of the one-window lagged timers (never 0.0, never two windows in one line).
  stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%3N)" "$line"; done; }
  mpirun -np 1 $LG run --fixture single --device cuda --iters 200 --log-interval 50 2>&1 | stamp > "$R/live_single.log"
  echo "live_single: $(grep -c 'iteration ' "$R/live_single.log") log lines; reader stamps: $(grep 'iteration ' "$R/live_single.log" | cut -d' ' -f1 | tr '\n' ' ')"
  for arm in baseline syncfree onesync zerosync; do
    mpirun -np 1 $LG run --fixture single --arm $arm --device cuda --iters 100 --log-interval 20 --hidden-size 2048 \
      --num-layers 4 --seq-length 1024 --num-attention-heads 16 > "$R/timers_2048x4_$arm.log" 2>&1
    echo "timers_2048x4 $arm: exit $?; elapsed ms/iteration: $(grep -o 'elapsed time per iteration (ms): [0-9.]*' "$R/timers_2048x4_$arm.log" | awk '{print $NF}' | tr '\n' ' ')"
  done
  step timers_gate_single 300 mpirun -np 1 $B/suites/loopgate_gates --lg_fixture=single --lg_device=cuda \
    --lg_timeout=240 '--gtest_filter=*Timer*'
fi

if has profile; then
  # Launch starvation (docs/profile.md): the CUPTI activity tests, one profiled run, one profiled ab.
  step profile_unit 120 mpirun -np 1 $B/suites/gpu/loopgate_gpu_unit '--gtest_filter=CuptiProfileTest.*:CuptiCounterTest.*'
  step profile_run 120 mpirun -np 1 $LG run --fixture single --arm baseline --device cuda --profile --iters 20 --quiet
  step profile_ab 300 mpirun -np 1 $LG ab --arms baseline,syncfree --fixture single --device cuda --profile --phases 6 \
    --phase-iters 10 --log-interval 1
  tail -12 "$R/profile_run.log"; grep -vE '^ *\[|^\s*$' "$R/profile_ab.log" | tail -22
fi

if has bench; then
  # Google Benchmark over the loop (docs/bench.md): every arm on the launch-bound and balanced configs, and the
  # seed's host-cost microbenchmark; JSON kept.
  step bench_single 300 mpirun -np 1 $B/suites/bench/loopgate_bench --device cuda --configs launch-bound,balanced \
    --benchmark_out="$R/bench_single.json" --benchmark_out_format=json
  step bench_host_form 120 mpirun -np 1 $B/suites/bench/loopgate_bench --device cuda --benchmark_filter='^host_form/'
  grep -E '^(step|host_form)/' "$R/bench_single.log" "$R/bench_host_form.log" | head -40
fi

if has bad; then
  # Bad input that only a GPU build reaches (the CPU build stops at --device cuda): one line, exit 2.
  for args in "--arm baseline --log-interval 4" "--arm zerosync --log-interval 1" "--arm zerosync --capture-probe optimizer@2"; do
    mpirun -np 1 $LG run --fixture single --device cuda --cuda-graph iteration $args > "$R/bad.log" 2>&1
    echo "bad input '$args': exit $? $(grep -m1 error "$R/bad.log")"
  done
fi

#!/usr/bin/env bash
# The gate suites on the GPU tier (NCCL, one GPU per rank, bf16 params): equivalence, nan_detection, timers,
# logging_exit and sync_budget for every candidate arm, per fixture that fits the GPUs present (single on one
# GPU; tp2sp and pp2 on two); then the GPU-only verdicts of suites/gpu/test_gpu_loop.cpp (ledger == CUPTI per
# site per iteration for every arm, the CUDA-graph capture probe) on the same fixtures. Builds with the gpu
# preset first when BUILD=1. Logs and gtest JSON go to $RESULTS. GATES_FIXTURES / LOOP_FIXTURES pick fixtures
# ("none" skips that part), GATES_FILTER the gate tests.
set -uo pipefail
cd "$(dirname "$0")/.."
R="${RESULTS:-build/gpu/results}"
mkdir -p "$R"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 NCCL_ALGO=Ring NCCL_PROTO=Simple CUBLAS_WORKSPACE_CONFIG=:4096:8 GTEST_COLOR=no
B=build/gpu
if [ "${BUILD:-0}" = 1 ]; then
  export LOOPGATE_TORCH_PREFIX="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
  extra=(-DLOOPGATE_TORCH_NCCL_DIR="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])')")
  [ -n "${LOOPGATE_VENDOR_DIR:-}" ] && extra+=(-DLOOPGATE_VENDOR_DIR="$LOOPGATE_VENDOR_DIR")
  cmake --preset gpu "${extra[@]}" > "$R/configure.log" 2>&1 || { tail -40 "$R/configure.log"; exit 1; }
  { time ninja -C $B -j "$(nproc)" loopgate_gates loopgate loopgate_gpu_loop; } > "$R/build.log" 2>&1 || { grep -E 'error' -A3 "$R/build.log" | head -60; exit 1; }
fi
F='Arms/Equivalence.*:GatePower.Equivalence*:Arms/NanDetection.*:NanDetection.*:GatePower.NanDetection*'
F+=':Arms/Timers.*:Timers.*:GatePower.Timers*:Arms/LoggingExit.*:LoggingExit.*:GatePower.LoggingExit*'
F+=':Arms/SyncBudget.*:SyncBudget.*:GatePower.SyncBudget*'
F="${GATES_FILTER:-$F}"  # e.g. only the equivalence gate
ngpu="$(nvidia-smi -L | wc -l)"
fixtures="single"
[ "$ngpu" -ge 2 ] && fixtures="tp2sp pp2 single"
loop_fixtures="${LOOP_FIXTURES:-$fixtures}"
fixtures="${GATES_FIXTURES:-$fixtures}"
rc=0
for fx in $fixtures; do
  [ "$fx" = none ] && continue
  np=1; [ "$fx" != single ] && np=2
  start=$(date +%s)
  timeout 400 mpirun -np $np $B/suites/loopgate_gates --lg_fixture=$fx --lg_device=cuda --lg_timeout=300 \
    "--gtest_filter=$F" --gtest_output=json:"$R/gates_$fx.json" > "$R/gates_$fx.log" 2>&1
  r=$?
  echo "gates $fx np $np: exit $r, $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$R/gates_$fx.log" | tr '\n' ' ')"
  [ $r -ne 0 ] && rc=1
done
for fx in $loop_fixtures; do
  [ "$fx" = none ] && continue
  np=1; [ "$fx" != single ] && np=2
  # Two processes: a refused capture (the baseline's probe) comes last in its own process.
  for part in LedgerEqualsCupti CaptureProbe; do
    start=$(date +%s)
    timeout 400 mpirun -np $np $B/suites/gpu/loopgate_gpu_loop --lg_fixture=$fx --lg_timeout=300 \
      "--gtest_filter=*$part*" --gtest_output=json:"$R/gpu_loop_${part}_$fx.json" > "$R/gpu_loop_${part}_$fx.log" 2>&1
    r=$?
    echo "gpu_loop $part $fx np $np: exit $r, $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$R/gpu_loop_${part}_$fx.log" | tr '\n' ' ')"
    [ $r -ne 0 ] && rc=1
  done
done
exit $rc

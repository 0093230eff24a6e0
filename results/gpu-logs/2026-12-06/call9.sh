#!/usr/bin/env bash
# Device call 9 of 2026-12-06 (one GPU), on the final code (806cdc1: the loop's graph state made only where a replay
# asks): the GPU build; the gate on single with --device cuda on the checks the loop's refactors touch; the selftest.
source ci/device-steps.sh call9.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gate_single timeout 200 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check cuda_graph,resume,timers,logging_exit,nan_detection,equivalence
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda

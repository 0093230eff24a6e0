#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (one GPU), on d14a895 (since the last GPU run: the wire form and gather, the CPU launch
# changes, Mutation's one wrap, the driver owning the trailing read, --each-row): the GPU build; the selftest's defects
# section with --device cuda; the gate on single with --device cuda on the checks the loop's refactors touch.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 200 build/gpu/tools/loopgate selftest --section defects --device cuda \
  --json $L/selftest_cuda.json
step gate_single timeout 180 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check cuda_graph,resume,run_features,timers,logging_exit,nan_detection,equivalence --json $L/gate_single.json

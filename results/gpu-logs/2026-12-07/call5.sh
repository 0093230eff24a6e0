#!/usr/bin/env bash
# Device call 5 of 2026-12-07 (one GPU), on 9f6ee0a (since call 4: run_features' record cell holds a recorded run to
# an unrecorded one, 8cbec72/e51e85a): the GPU build; the selftest's defects section with --device cuda; the gate on
# single with --device cuda on the checks that read operator counts and the loop's rows.
source ci/device-steps.sh call5.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 230 build/gpu/tools/loopgate selftest --section defects --device cuda \
  --json $L/selftest_cuda.json
step gate_single timeout 190 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check sync_budget,cuda_graph,resume,run_features,timers,logging_exit,nan_detection,equivalence --json $L/gate_single.json

#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (one GPU), on the code after the gate's wire form, unbound ranks and CPU shards
# (4d8b5fa): the GPU build; the gate on single with --device cuda, every check; the selftest on cuda.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gate_single timeout 240 build/gpu/tools/loopgate gate --device cuda --fixture single --json $L/gate_single.json
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

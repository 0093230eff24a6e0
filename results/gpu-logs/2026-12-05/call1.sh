#!/usr/bin/env bash
# Device call 1 of 2026-12-05 (one GPU): after the house's second step (step driver, folded mutation points) and the
# run_features decisions exit-interval, save and resume: build, `loopgate selftest --section defects --device cuda`,
# `bash ci/gpu.sh` (CTest -L gpu, then the GPU gate on single with every check, resume and run_features included),
# then the save and load cost on the GPU (ci/checkpoint-cost.sh, 3 rounds).
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gpu_sh timeout 230 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step ckcost_cuda timeout 120 bash ci/checkpoint-cost.sh build/gpu/tools/loopgate 3 --device cuda

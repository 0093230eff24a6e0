#!/usr/bin/env bash
# Device call 2 of 2026-12-06 (one GPU), on the tree of the day's landing: build; `loopgate selftest --section defects
# --device cuda` (with defect-abort-due-dropped-at-load); `bash ci/gpu.sh` as a fresh runner would (its build done
# above), which runs CTest -L gpu and the GPU gate on single with every check.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gpu_sh timeout 250 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

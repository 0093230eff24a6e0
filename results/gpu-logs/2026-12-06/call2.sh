#!/usr/bin/env bash
# Device call 2 of 2026-12-06 (one GPU), on the tree of the day's landing: build; `loopgate selftest --section defects
# --device cuda` (with defect-abort-due-dropped-at-load). Kept short: the session had about 650 s of device time left.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

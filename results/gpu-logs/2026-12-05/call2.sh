#!/usr/bin/env bash
# Device call 2 of 2026-12-05 (one GPU): saves between log points (the log window in the checkpoint) and the save on
# the duration exit. Build; the resume, run_features and cuda_graph checks on single for every arm
# (`loopgate gate --device cuda`); `loopgate selftest --section defects --device cuda` with
# defect-window-skip-dropped-at-save.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step resume_cuda timeout 200 build/gpu/tools/loopgate gate --device cuda --fixture single --check resume,run_features,cuda_graph --json $L/resume_cuda.json
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

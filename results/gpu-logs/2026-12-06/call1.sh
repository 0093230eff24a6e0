#!/usr/bin/env bash
# Device call 1 of 2026-12-06 (one GPU): the save timed as Megatron's save_checkpoint_and_time (interval-time paused,
# save-checkpoint reported), and the per-rank NaN count of a window saved between log points. Build; resume, timers
# and run_features on single for every arm (`loopgate gate --device cuda`); `loopgate selftest --section defects
# --device cuda` with defect-save-pause-not-recovered and defect-save-window-reported-twice.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt 2>&1 || true
step build env RESULTS=$L/build bash ci/gpu-build.sh
step resume_cuda timeout 200 build/gpu/tools/loopgate gate --device cuda --fixture single --check resume,timers,run_features --json $L/resume_cuda.json
step selftest_cuda timeout 200 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

#!/usr/bin/env bash
# Device call 1 of 2026-12-04 (one H200), the restructured loop (instruments, replayed step, on-device bookkeeping
# out of train.cpp): build, `bash ci/gpu.sh`, `loopgate selftest --section defects --device cuda`, and the
# run_features gate on the GPU tier.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 220 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step selftest_cuda timeout 150 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step run_features_cuda timeout 120 build/gpu/tools/loopgate gate --device cuda --fixture single --check run_features --json $L/run_features_cuda.json

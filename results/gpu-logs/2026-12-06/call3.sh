#!/usr/bin/env bash
# Device call 3 of 2026-12-06 (one GPU): the batched read's copy on a stream of its own, its source kept with
# record_stream, and --stress extended to the allocator. Build; the races gate on single with
# defect-race-copy-source-unkept (under --stress); GPU CI (`NO_BUILD=1 bash ci/gpu.sh`: every arm's read now goes
# through the side stream); `loopgate selftest --section defects --device cuda`.
source ci/device-steps.sh call3.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt 2>&1 || true
step build env RESULTS=$L/build bash ci/gpu-build.sh
step races_unkept timeout 90 build/gpu/tools/loopgate gate --device cuda --fixture single --arm defect-race-copy-source-unkept --check races --json $L/races_unkept.json
step gpu_ci env NO_BUILD=1 RESULTS=$L/gpu_ci timeout 220 bash ci/gpu.sh
step selftest_cuda timeout 150 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

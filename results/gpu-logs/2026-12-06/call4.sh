#!/usr/bin/env bash
# Device call 4 of 2026-12-06 (one GPU), on the tree of the session's last code commit: build; the races gate on single
# with defect-race-copy-source-unkept under --stress; `loopgate selftest --section defects --device cuda`.
source ci/device-steps.sh call4.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step races_unkept timeout 90 build/gpu/tools/loopgate gate --device cuda --fixture single --arm defect-race-copy-source-unkept --check races --json $L/races_unkept.json
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

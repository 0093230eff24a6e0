#!/usr/bin/env bash
# Device call 2 of 2026-12-04 (one H200), restart replay: build, the resume check on the single fixture for every
# arm, `loopgate selftest --section defects --device cuda` with the six save/load defects, and `bash ci/gpu.sh`.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step build env RESULTS=$L/build bash ci/gpu-build.sh
step resume_cuda timeout 200 build/gpu/tools/loopgate gate --device cuda --fixture single --check resume --json $L/resume_cuda.json
step selftest_cuda timeout 200 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gpu_sh timeout 240 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

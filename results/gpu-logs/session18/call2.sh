#!/usr/bin/env bash
# Session 18, device call 2 (one H200), the session's final code (1eac945's Trace decoding without copies, and
# docs): build, `bash ci/gpu.sh`, `loopgate selftest --section defects --device cuda`.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 220 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step selftest_cuda timeout 200 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

#!/usr/bin/env bash
# Device call 6 of 2026-12-07 (one GPU), on 6ac45a6 (since call 5: the selftest skips a defect's tests after its
# first failing one, --lg_skip_rejected_arms, and ends a hanging defect's launch at its abort): the GPU build; the
# selftest's defects section with --device cuda.
source ci/device-steps.sh call6.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 230 build/gpu/tools/loopgate selftest --section defects --device cuda \
  --json $L/selftest_cuda.json

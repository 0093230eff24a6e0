#!/usr/bin/env bash
# Session 11, device call 3 (one H200): GPU CI on the landed code, `bash ci/gpu.sh` (CTest -L gpu, then
# `loopgate gate --device cuda` and its report). Logs packed into $OUT/call3.tgz after each step.
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 330 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

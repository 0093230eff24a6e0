#!/usr/bin/env bash
# Session 15, device call 3 (one H200): GPU CI on the session's final code (after call 1's tree: a CPU unit test, a
# defect's description and a comment, docs): `bash ci/gpu.sh`.
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 400 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

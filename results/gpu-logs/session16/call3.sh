#!/usr/bin/env bash
# Session 16, device call 3 (one H200): GPU CI on the session's final code (after call 1's tree: the unit tests'
# shared wrong(), the gate suites' shared problem_list(), the unity build of the CPU tier, a unit test's expected
# value, docs): `bash ci/gpu.sh`.
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 400 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

#!/usr/bin/env bash
# Session 14, device call 3 (one H200), the session's final code: GPU CI, `bash ci/gpu.sh` (CTest -L gpu, then
# `loopgate gate --device cuda`: every check on single, the new TimersGraph and the replayed races scenario included).
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 340 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step gate_logs bash -c 'for d in /tmp/loopgate-gate-*; do mkdir -p '$L'/gatelogs/$(basename $d); cp $d/*.log $d/*.rc '$L'/gatelogs/$(basename $d)/ 2>/dev/null; done; ls '$L'/gatelogs/*'

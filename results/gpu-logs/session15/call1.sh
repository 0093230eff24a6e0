#!/usr/bin/env bash
# Session 15, device call 1 (one H200): GPU CI on the flat optimizer (1b0f429), the operator counter's name table and
# the LR cases' single microbatch: `bash ci/gpu.sh` (CTest -L gpu, then `loopgate gate --device cuda` on single, the
# GPU golden values and digests included), then the gate logs (per-scenario seconds).
source ci/device-steps.sh call1.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 400 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step gate_logs bash -c 'for d in /tmp/loopgate-gate-*; do mkdir -p '$L'/gatelogs/$(basename $d); cp $d/*.log $d/*.rc '$L'/gatelogs/$(basename $d)/ 2>/dev/null; done; ls '$L'/gatelogs/*'

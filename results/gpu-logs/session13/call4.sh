#!/usr/bin/env bash
# Session 13, device call 4 (one H200, the warm machine of call 3, its build kept): the GPU-only launches of
# `loopgate gate --device cuda` that call 3's `ci/gpu.sh` did not reach before that step's 300-s limit. The
# command as the device tool ran it:
mkdir -p $OUT/logs; source ci/gpu-env.sh; (time build/gpu/tools/loopgate gate --device cuda --fixture single --check ledger_cupti,capture_probe) > $OUT/logs/gate_gpu_only.log 2>&1; echo rc=$? >> $OUT/logs/gate_gpu_only.log; tail -25 $OUT/logs/gate_gpu_only.log

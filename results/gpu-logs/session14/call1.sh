#!/usr/bin/env bash
# Session 14, device call 1 (one H200): build; CTest -L gpu and the GPU gate through ci/gpu.sh, the gate now under
# a private MPS server (4 shards of single share the GPU's context); then single again with 8 shards under MPS.
source ci/device-steps.sh call1.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
step runner_info bash -c 'command -v nvidia-cuda-mps-control; nvidia-smi --query-gpu=name,compute_mode,driver_version --format=csv; nproc'
step gpu_sh timeout 420 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step gate_shards8_mps timeout 200 bash -c 'M=$(mktemp -d /tmp/m.XXXX); export CUDA_MPS_PIPE_DIRECTORY=$M/p CUDA_MPS_LOG_DIRECTORY=$M/l; mkdir -p $M/p $M/l; nvidia-cuda-mps-control -d; build/gpu/tools/loopgate gate --device cuda --fixture single --shards 8 --json '$L'/g8.json; rc=$?; echo quit | nvidia-cuda-mps-control; exit $rc'
step gate_logs bash -c 'for d in /tmp/loopgate-gate-*; do mkdir -p '$L'/gatelogs/$(basename $d); cp $d/*.log $d/*.rc '$L'/gatelogs/$(basename $d)/ 2>/dev/null; done; ls -R '$L'/gatelogs | head -50'

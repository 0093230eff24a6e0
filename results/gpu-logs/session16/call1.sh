#!/usr/bin/env bash
# Session 16, device call 1 (one H200): GPU CI on the session's code (tensor_checksum without the CPU copy,
# gather_trace in MessagePack, the unity build (CPU only), GLIBC_TUNABLES for the gate's ranks): `bash ci/gpu.sh`,
# then `loopgate selftest --section defects --device cuda` (not rerun since session 8).
source ci/device-steps.sh call1.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 400 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step selftest_cuda timeout 270 bash -c 'source ci/gpu-env.sh && build/gpu/tools/loopgate selftest --section defects --device cuda --json $0/selftest_cuda.json' "$L"

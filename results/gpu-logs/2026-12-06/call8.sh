#!/usr/bin/env bash
# Device call 8 of 2026-12-06 (one GPU), right after call 7 on the same tree: `loopgate pair` on Megatron-LM with the
# good candidate, one run a side (pair's runs count their syncs through the injection library split in c1dae98 and
# read the shim's exact values). The GPU build again only where call 7's is not on this machine.
source ci/device-steps.sh call8.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
[ -x build/gpu/tools/loopgate ] && [ -e build/gpu/tools/cupti/libloopgate_sync_inject.so ] || \
  step build env RESULTS=$L/build bash ci/gpu-build.sh
step pair_good env GOOD_RUNS=1 bash ci/megatron-pair.sh .megatron "$OUT/mp-good" good-candidate
cp "$OUT"/mp-good/*.txt "$L"/ 2>/dev/null; true

#!/usr/bin/env bash
# Session 16, device call 2 (one H200): where an LR case's 8.5 ms per iteration goes on the GPU tier. The LR cases'
# tiny model (hidden 16, 2 heads, seq 8, 1 layer, one microbatch of 8) under `loopgate run --profile` (CUPTI: busy,
# idle and launch-starved time, kernels and syncs per iteration), baseline and zerosync.
source ci/device-steps.sh call2.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
tiny="--hidden-size 16 --num-attention-heads 2 --seq-length 8 --num-layers 1 --micro-batch-size 8 --global-batch-size 8"
for arm in baseline zerosync; do
  step profile_$arm bash -c "source ci/gpu-env.sh && mpiexec -n 1 build/gpu/tools/loopgate run --fixture single --device cuda --arm $arm --profile --iters 60 --quiet $tiny"
done

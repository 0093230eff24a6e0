#!/usr/bin/env bash
# Session 13, device call 3 (one H200), the session's final code: GPU CI (`ci/gpu.sh`: CTest -L gpu, then
# `loopgate gate --device cuda`); syncs of zerosync + --cuda-graph iteration with log points replayed (CUPTI beside
# the ledger); the digests' syncs (CUPTI) and their cost at 4096x4x2048 with 8 microbatches. Logs packed into
# $OUT/call3.tgz after every step.
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step gpu_sh timeout 300 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step cupti_zerosync_graph timeout 40 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 4 --iters 12 --cupti --syncs --quiet
step cupti_baseline timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --quiet
step cupti_baseline_digests timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --quiet --digests
step ab_digests_big8_zerosync timeout 110 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 2 --log-interval 2 --global-batch-size 16 $(lg_model_flags 4096x4x2048)

#!/usr/bin/env bash
# Session 13, device call 2 (one H200), the tree of a9bcd5d: the digests' new hash (three sums per chunk) and
# interned records; zerosync + --cuda-graph iteration with log points replayed (the cuda_graph gate on the GPU,
# then the profile and the unprofiled log lines at log interval 20); the digests' cost again, at 4096x4x2048
# (device-bound) and on the miniature. Logs packed into $OUT/call2.tgz after every step.
source ci/device-steps.sh call2.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
BIG=$(lg_model_flags 4096x4x2048)
step gate_cuda_graph timeout 120 $B gate --device cuda --fixture single --check cuda_graph
step profile_zerosync_graph timeout 60 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 20 --iters 60 --profile --quiet
step run_zerosync_graph_li20 timeout 60 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 20 --iters 200
step ab_digests_big_zerosync timeout 100 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 4 --log-interval 4 $BIG
step ab_digests_baseline timeout 60 $B ab --device cuda --arms baseline,baseline:digests --phases 11 --phase-iters 10
step ab_digests_big_baseline timeout 100 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 4 $BIG
step ctest_digests ctest --test-dir build/gpu -R gpu_digests --output-on-failure

#!/usr/bin/env bash
# Session 12, device call 3 (one H200), the session's final tree: the digests' kernel test; the digests' cost on
# the host-bound miniature and at 2048x4x1024 (where device work covers host time); then GPU CI, `ci/gpu.sh`
# (CTest -L gpu, then `loopgate gate --device cuda`). Logs packed into $OUT/call3.tgz after every step.
source ci/device-steps.sh call3.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step ctest_digests ctest --test-dir build/gpu -R gpu_digests --output-on-failure
step ab_digests_baseline timeout 100 $B ab --device cuda --arms baseline,baseline:digests --phases 11 --phase-iters 10
step ab_digests_2048x4x1024_1 timeout 80 $B ab --device cuda --arms baseline,baseline:digests --phases 8 --phase-iters 5 $(lg_model_flags 2048x4x1024)
step ab_digests_2048x4x1024_2 timeout 80 $B ab --device cuda --arms baseline,baseline:digests --phases 8 --phase-iters 5 $(lg_model_flags 2048x4x1024)
step gpu_sh timeout 290 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

#!/usr/bin/env bash
# Session 12, device call 1 (one H200): the digests' kernel (trainer/measure/digest_hash.cu) builds and equals the
# host loop (gpu_digests, and its mutation run must fail); the digests' cost (ab, inside one run, alternating) and
# syncs (CUPTI); localization on the GPU; the equivalence and collectives rows; a zerosync + graph profile for the
# device floor (issue 23). Logs packed into $OUT/call1.tgz after every step.
source ci/device-steps.sh call1.tgz
step nvcc bash -c 'which nvcc || ls /usr/local/cuda/bin/nvcc; nvidia-smi -L'
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step ctest_digests ctest --test-dir build/gpu -R gpu_digests --output-on-failure
step ctest_digests_mutation_must_fail env LOOPGATE_WRONG_EXPECTATIONS=1 ctest --test-dir build/gpu -R gpu_digests --output-on-failure
step ab_digests_baseline_1 timeout 150 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 20
step ab_digests_zerosync_1 timeout 150 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 20 --log-interval 20
step ab_digests_baseline_2 timeout 150 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 20
step ab_digests_zerosync_2 timeout 150 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 20 --log-interval 20
step cupti_baseline timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --quiet
step cupti_baseline_digests timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --digests --quiet
step cupti_zerosync_digests timeout 40 $B run --device cuda --arm zerosync --iters 12 --log-interval 4 --cupti --syncs --digests --quiet
step trace_base timeout 40 $B run --device cuda --arm baseline --iters 3 --digests --quiet --trace $L/t_base.json
step trace_fc1 timeout 40 $B run --device cuda --arm defect-numerics-fc1-backward --iters 3 --digests --quiet --trace $L/t_fc1.json
step compare_fc1 $B compare --a $L/t_base.json --b $L/t_fc1.json
rm -f $L/t_*.json
step gate_equivalence_collectives timeout 200 $B gate --device cuda --fixture single --check equivalence,collectives
step profile_zerosync_graph timeout 60 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 20 --iters 60 --profile --quiet

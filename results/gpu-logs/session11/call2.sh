#!/usr/bin/env bash
# Session 11, device call 2 (one H200): the digests' cost (ab, inside one run) and syncs (CUPTI), localization of the
# planted numerics defects on the GPU. Logs in $OUT/logs, packed after every step into $OUT/call2.tgz.
source ci/device-steps.sh call2.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step ab_digests_baseline timeout 100 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 20
step ab_digests_zerosync timeout 100 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 20 --log-interval 20
step cupti_baseline timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --quiet
step cupti_baseline_digests timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --syncs --digests --quiet
step cupti_zerosync_digests timeout 40 $B run --device cuda --arm zerosync --iters 12 --log-interval 4 --cupti --syncs --digests --quiet
step trace_base timeout 40 $B run --device cuda --arm baseline --iters 3 --digests --quiet --trace $L/t_base.json
step trace_fc1 timeout 40 $B run --device cuda --arm defect-numerics-fc1-backward --iters 3 --digests --quiet --trace $L/t_fc1.json
step compare_fc1 $B compare --a $L/t_base.json --b $L/t_fc1.json
rm -f $L/t_*.json
step gate_equivalence_collectives timeout 200 $B gate --device cuda --fixture single --check equivalence,collectives --json $L/gate.json
step selftest_numerics timeout 120 $B selftest --device cuda --section defects --defect defect-numerics,defect-numerics-fc1-backward,defect-numerics-proj-tp1,defect-collective-bucket-order

#!/usr/bin/env bash
# Session 12, device call 2 (one H200): the digests' cost with the kernel (6d130f3), inside one run, alternating,
# with each phase's host CPU time beside its wall time (f39cf66): baseline and zerosync at log interval 20, twice
# each, 11 phases of 10 iterations per arm. Logs packed into $OUT/call2.tgz after every step.
source ci/device-steps.sh call2.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
for k in 1 2; do
  step ab_digests_baseline_$k timeout 150 $B ab --device cuda --arms baseline,baseline:digests --phases 11 --phase-iters 10 --json $L/ab_baseline_$k.json
  step ab_digests_zerosync_$k timeout 150 $B ab --device cuda --arms zerosync,zerosync:digests --phases 11 --phase-iters 20 --log-interval 20 --json $L/ab_zerosync_$k.json
done

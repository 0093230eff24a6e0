#!/usr/bin/env bash
# Session 11, device call 1 (one H200): build, the digests' cost and syncs, a localization on the GPU, then GPU CI.
# Run from the repository root on the device machine with $OUT set; every log lands in $OUT.
set -u
export LOOPGATE_VENDOR_DIR=$PWD/.vendor
step() { local name=$1; shift; local t0=$(date +%s); "$@" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/rc.txt"; }
step build env RESULTS=$OUT/r/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step ab_digests_baseline timeout 90 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 20
step ab_digests_zerosync timeout 90 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 20 --log-interval 20
step cupti_baseline timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --quiet
step cupti_baseline_digests timeout 40 $B run --device cuda --arm baseline --iters 6 --cupti --digests --quiet
step cupti_zerosync_digests timeout 40 $B run --device cuda --arm zerosync --iters 10 --log-interval 5 --cupti --digests --quiet
step trace_base timeout 40 $B run --device cuda --arm baseline --iters 3 --digests --quiet --trace $OUT/t_base.json
step trace_fc1 timeout 40 $B run --device cuda --arm defect-numerics-fc1-backward --iters 3 --digests --quiet --trace $OUT/t_fc1.json
step compare_fc1 $B compare --a $OUT/t_base.json --b $OUT/t_fc1.json
step gpu_sh timeout 380 env RESULTS=$OUT/r/gpu NO_BUILD=1 bash ci/gpu.sh
tar czf $OUT/gpu_results.tgz -C $OUT r/gpu && rm -rf $OUT/r/gpu

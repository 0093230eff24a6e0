#!/usr/bin/env bash
# Session 11, device call 4 (one H200): the final tree builds on the GPU runner's LibTorch, and the issue-24 rows
# pass there: `gate --device cuda --check equivalence,collectives` on single. Logs packed into $OUT/call4.tgz.
set -u
export LOOPGATE_VENDOR_DIR=$PWD/.vendor
L=$OUT/logs; mkdir -p $L
step() { local name=$1; shift; local t0=$(date +%s); "$@" > "$L/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$L/rc.txt"; tar czf $OUT/call4.tgz -C $OUT logs; }
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
step gate_equivalence_collectives timeout 60 build/gpu/tools/loopgate gate --device cuda --fixture single --check equivalence,collectives

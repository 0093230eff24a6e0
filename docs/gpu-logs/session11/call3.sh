#!/usr/bin/env bash
# Session 11, device call 3 (one H200): GPU CI on the landed code, `bash ci/gpu.sh` (CTest -L gpu, then
# `loopgate gate --device cuda` and its report). Logs packed into $OUT/call3.tgz after each step.
set -u
export LOOPGATE_VENDOR_DIR=$PWD/.vendor
L=$OUT/logs; mkdir -p $L
step() { local name=$1; shift; local t0=$(date +%s); "$@" > "$L/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$L/rc.txt"; tar czf $OUT/call3.tgz -C $OUT logs; }
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 330 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh

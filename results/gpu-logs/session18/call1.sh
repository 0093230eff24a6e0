#!/usr/bin/env bash
# Session 18, device call 1 (one H200), tree at the session's start (8388e7d, includes f4ba1d6's warm-up move that
# session 17 never built on a GPU): build, `bash ci/gpu.sh`, `loopgate selftest --section defects --device cuda`,
# then, while the call's time allows, a host CPU profile (gperftools, .vendor/prof) of the single fixture's GPU gate
# suites from 15 s to 45 s of their run.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
T0=$(date +%s)
step build env RESULTS=$L/build bash ci/gpu-build.sh
step gpu_sh timeout 200 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step selftest_cuda timeout 220 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
profile_suites() {
  local left=$(( 560 - ($(date +%s) - T0) ))
  [ $left -lt 60 ] && { echo "not run: $left s left"; return 0; }
  mpiexec -n 1 -x LD_PRELOAD=$PWD/.vendor/prof/libprofiler.so.0 -x LD_LIBRARY_PATH=$PWD/.vendor/prof:${LD_LIBRARY_PATH:-} \
    -x CPUPROFILE=/tmp/suites.prof -x CPUPROFILESIGNAL=12 -x CPUPROFILE_FREQUENCY=1000 \
    build/gpu/suites/loopgate_gates --lg_fixture=single --lg_device=cuda > $L/suites_profiled.out 2>&1 &
  sleep 15
  local pid; pid=$(pgrep -x loopgate_gates | head -1)
  local span=$(( left - 40 )); [ $span -gt 30 ] && span=30
  echo "profiling pid $pid from 15 s for $span s"
  kill -USR2 "$pid"; sleep $span; kill -USR2 "$pid"
  sleep 1; pkill -x loopgate_gates; wait
  perl .vendor/prof/google-pprof --text --cum build/gpu/suites/loopgate_gates /tmp/suites.prof.0 2>/dev/null | head -150 > $L/pprof_cum.txt
  perl .vendor/prof/google-pprof --text build/gpu/suites/loopgate_gates /tmp/suites.prof.0 2>/dev/null | head -80 > $L/pprof_flat.txt
  head -30 $L/pprof_flat.txt
}
step suites_prof profile_suites

#!/usr/bin/env bash
# Session 17, device call 2 (one H200), tree eec52f2: GPU CI on the session's code (the shared record_fields() and
# the new gpu_digests test of the parameters' checksum on device tensors), that test with
# LOOPGATE_WRONG_EXPECTATIONS=1 (it must fail), and a host-side CPU profile (gperftools, .vendor/prof) of the
# single fixture's GPU gate suites between 20 s and 60 s of their run.
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step build env RESULTS=$L/build bash ci/gpu-build.sh
step digests_wrong env LOOPGATE_WRONG_EXPECTATIONS=1 mpiexec -n 1 build/gpu/suites/gpu/loopgate_gpu_digests
step gpu_sh timeout 400 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step gate_logs bash -c 'for d in /tmp/loopgate-gate-*; do cp $d/*.log '$L'/ 2>/dev/null; done; ls '$L
profile_suites() {
  mpiexec -n 1 -x LD_PRELOAD=$PWD/.vendor/prof/libprofiler.so.0 -x LD_LIBRARY_PATH=$PWD/.vendor/prof:${LD_LIBRARY_PATH:-} \
    -x CPUPROFILE=/tmp/suites.prof -x CPUPROFILESIGNAL=12 -x CPUPROFILE_FREQUENCY=1000 \
    build/gpu/suites/loopgate_gates --lg_fixture=single --lg_device=cuda > $L/suites_profiled.out 2>&1 &
  sleep 20
  local pid; pid=$(pgrep -x loopgate_gates | head -1)
  echo "profiling pid $pid from 20 s to 60 s"
  kill -USR2 "$pid"; sleep 40; kill -USR2 "$pid"
  wait
  grep -E "tests ran|PASSED|FAILED" $L/suites_profiled.out | head
  ls -la /tmp/suites.prof*
  perl .vendor/prof/google-pprof --text --cum build/gpu/suites/loopgate_gates /tmp/suites.prof.0 > $L/pprof_cum.txt 2>$L/pprof_err.txt
  perl .vendor/prof/google-pprof --text build/gpu/suites/loopgate_gates /tmp/suites.prof.0 > $L/pprof_flat.txt 2>>$L/pprof_err.txt
  head -30 $L/pprof_flat.txt
}
step suites_prof profile_suites

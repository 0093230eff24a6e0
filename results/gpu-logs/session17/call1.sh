#!/usr/bin/env bash
# Session 17, device call 1 (one H200): where the host time of an LR scenario goes on the GPU. The LR family (21
# scenarios x 200 iterations of the tiny model) is the largest of the GPU single gate, and its CUPTI profile
# (session 16, call 2) shows the device idle 97 % of each iteration, waiting for the host's next launch. Here the
# host side is sampled with gperftools' CPU profiler (libprofiler, carried in .vendor/prof from Debian 12's
# libgoogle-perftools4), switched on and off by SIGUSR2 so that start-up and exit are left out.
source ci/device-steps.sh call1.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step machine bash -c 'uname -r; nproc; lscpu | grep -E "Model name|MHz"; nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv; which perl nm addr2line objdump'
step build env RESULTS=$L/build bash ci/gpu-build.sh loopgate_gates
F='*LrSchedule*'
step lr_plain mpiexec -n 1 build/gpu/suites/loopgate_gates --lg_fixture=single --lg_device=cuda --gtest_filter="$F"
profile_lr() {
  mpiexec -n 1 -x LD_PRELOAD=$PWD/.vendor/prof/libprofiler.so.0 -x LD_LIBRARY_PATH=$PWD/.vendor/prof:${LD_LIBRARY_PATH:-} \
    -x CPUPROFILE=/tmp/lr.prof -x CPUPROFILESIGNAL=12 -x CPUPROFILE_FREQUENCY=1000 \
    build/gpu/suites/loopgate_gates --lg_fixture=single --lg_device=cuda --gtest_filter="$F" &
  sleep 12
  local pid; pid=$(pgrep -x loopgate_gates | head -1)
  echo "profiling pid $pid from 12 s to 32 s"
  kill -USR2 "$pid"; sleep 20; kill -USR2 "$pid"
  wait
  ls -la /tmp/lr.prof*
  perl .vendor/prof/google-pprof --text --cum build/gpu/suites/loopgate_gates /tmp/lr.prof.0 > $L/pprof_cum.txt 2>$L/pprof_err.txt
  perl .vendor/prof/google-pprof --text build/gpu/suites/loopgate_gates /tmp/lr.prof.0 > $L/pprof_flat.txt 2>>$L/pprof_err.txt
  head -40 $L/pprof_flat.txt
}
step lr_prof profile_lr

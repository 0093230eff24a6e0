#!/usr/bin/env bash
# Session 14, device call 2 (one H200): build; zerosync + --cuda-graph iteration at the device floor (log reads
# trailing the next replay, timers cut between graph segments): profile, unprofiled log lines, CUPTI syncs; an MPS
# server's files and clients; then ci/gpu.sh (CTest -L gpu, the gate under MPS with 4 shards of single).
source ci/device-steps.sh call2.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step profile_zerosync_graph timeout 50 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 20 --iters 60 --profile --quiet
step run_zerosync_graph_li20 timeout 40 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 20 --iters 200
step cupti_zerosync_graph timeout 30 $B run --device cuda --arm zerosync --cuda-graph iteration --log-interval 4 --iters 12 --cupti --syncs --quiet
step mps_probe timeout 40 bash -c 'M=$(mktemp -d /tmp/m.XXXX); export CUDA_MPS_PIPE_DIRECTORY=$M/p CUDA_MPS_LOG_DIRECTORY=$M/l; mkdir -p $M/p $M/l; nvidia-cuda-mps-control -d; ls -la $M/p; '$B' run --device cuda --iters 3 --quiet & sleep 8; echo get_server_list | nvidia-cuda-mps-control; wait; echo quit | nvidia-cuda-mps-control; sleep 1; tail -20 $M/l/*.log'
step gpu_sh timeout 320 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
step gate_logs bash -c 'for d in /tmp/loopgate-gate-*; do mkdir -p '$L'/gatelogs/$(basename $d); cp $d/*.log $d/*.rc '$L'/gatelogs/$(basename $d)/ 2>/dev/null; done; ls '$L'/gatelogs/*'

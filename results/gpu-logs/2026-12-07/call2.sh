#!/usr/bin/env bash
# Device call 2 of 2026-12-07 (one GPU), on the final code of the gate's CPU changes (the wire form, the gather to
# rank 0 and back, unbound ranks, shards): the GPU build; the selftest on cuda; the gate on single with --device
# cuda on the checks a scenario's gather feeds. (Call 1 ran the whole single gate, which did not end in its 240 s.)
source ci/device-steps.sh call2.tgz
gpu_call_start
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gate_single timeout 150 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check cuda_graph,resume,timers,logging_exit,nan_detection,equivalence --json $L/gate_single.json

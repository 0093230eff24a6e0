#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (one GPU), on bdbf328 (the gate's CPU changes: the Trace's wire form, the gather to
# rank 0 and back, unbound ranks, shards; and Mutation's one wrap): the GPU build; the selftest on cuda (every planted
# defect through the new wrap); the gate on single with --device cuda on the checks a scenario's gather feeds.
source ci/device-steps.sh call1.tgz
gpu_call_start
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gate_single timeout 120 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check cuda_graph,resume,timers,logging_exit,nan_detection,equivalence --json $L/gate_single.json

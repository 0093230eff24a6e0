#!/usr/bin/env bash
# Device call 1 of 2026-12-07 (one GPU), on bdbf328 (the gate's CPU changes: the Trace's wire form, the gather to
# rank 0 and back, unbound ranks, shards; and Mutation's one wrap): the GPU build; the selftest on cuda (every planted
# defect through the new wrap). Kept to these two: refused starts left this session about 350 s of device time.
source ci/device-steps.sh call1.tgz
gpu_call_start
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

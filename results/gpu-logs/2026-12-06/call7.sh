#!/usr/bin/env bash
# Device call 7 of 2026-12-06 (one GPU), on the tree of the session's last code commit (#57's refactors: open records
# closed at log points, one LogWindow, the segment's timers and hand_over, the step driver wrapping one callable,
# decorator timers, the injection library split by concern):
# - the GPU build (vendor folder);
# - Megatron-LM under `loopgate syncs` (the injection library, split; its table written through
#   trainer/measure/sync_table_file.h), the table read back by `loopgate syncs --diff` against call 5's table;
# - the gate on single with --device cuda on the checks the refactors touch (cuda_graph replays the step on a real
#   graph; resume saves and loads between log points; timers; logging_exit; nan_detection; equivalence);
# - `loopgate selftest --section defects --device cuda`.
source ci/device-steps.sh call7.tgz
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step syncs bash ci/megatron-syncs.sh .megatron "$OUT/s"
cp "$OUT"/s/syncs-run.json "$L"/syncs_table.json 2>/dev/null; true
step syncs_diff build/gpu/tools/loopgate syncs --diff results/gpu-logs/2026-12-06/call5_overhead_ab_table.json "$L"/syncs_table.json
step gate_single timeout 200 build/gpu/tools/loopgate gate --device cuda --fixture single \
  --check cuda_graph,resume,timers,logging_exit,nan_detection,equivalence --json $L/gate_single.json
step selftest_cuda timeout 170 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json

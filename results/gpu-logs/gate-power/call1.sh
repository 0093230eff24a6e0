# Device call (one H100): the gate-power defects and checks on the GPU tier, and the counter's overhead with the
# exact-value recording again on the code that judges it.
#   source results/gpu-logs/gate-power/call1.sh
source ci/device-steps.sh call1.tgz logs
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build env RESULTS=$L/build bash ci/gpu-build.sh
step selftest_cuda timeout 240 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
step gate_single timeout 150 build/gpu/tools/loopgate gate --device cuda --fixture single --check timers,resume,races --json $L/gate_single.json
mkdir -p "$OUT/values-ab"
step overhead_ab env LOOPGATE_VALUES_DIR="$OUT/values-ab" AB_ITERS=300 bash ci/megatron-syncs.sh .megatron "$OUT/ab" ab
cp "$OUT"/ab/tables-ab/syncs.*.json "$L/" 2>/dev/null; true

# Device call 7 (the session's last device time): the counter's overhead with the exact-value recording on, judged
# by the landed statistic (the paired differences' Hodges-Lehmann location and signed-rank interval), 200
# iterations.
#   source results/gpu-logs/megatron-values/call7.sh
source ci/device-steps.sh call7.tgz logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
mkdir -p "$OUT/values-ab"
step overhead_ab env LOOPGATE_VALUES_DIR="$OUT/values-ab" AB_ITERS=200 bash ci/megatron-syncs.sh .megatron "$OUT/ab" ab

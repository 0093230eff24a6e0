# Device call 3 (on call 2's warm machine): the two timer candidates, and the counter's overhead inside one run
# (loopgate syncs --overhead-ab, 80 iterations) with the shim recording the exact values.
#   source results/gpu-logs/megatron-values/call3.sh
source ci/device-steps.sh call3.tgz logs
after_step() { cp "$OUT"/mp/*.txt "$L"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
step timers bash ci/megatron-pair.sh .megatron "$OUT/mp" bad-timer-accumulates bad-timer-loses-one
mkdir -p "$OUT/values-ab"
step overhead-ab env LOOPGATE_VALUES_DIR="$OUT/values-ab" bash ci/megatron-syncs.sh .megatron "$OUT/ab" ab
ls "$OUT/values-ab" >> "$L/overhead-ab.log" 2>&1

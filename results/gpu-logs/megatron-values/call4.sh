# Device call 4 (the session's last device time): the GPU build, then a plain A/A pair on Megatron-LM d98e8a64 with
# the shim's values, one run a side (the checkout against itself).
#   source results/gpu-logs/megatron-values/call4.sh
source ci/device-steps.sh call4.tgz logs
after_step() { cp "$OUT"/mp/*.txt "$L"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
step aa env AA_RUNS=1 bash ci/megatron-pair.sh .megatron "$OUT/mp" aa

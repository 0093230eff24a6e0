# Device call 2 for docs/megatron.md's exact-values section: the GPU build, then the nondeterministic A/A pair and
# the two candidates below the printed digits (LR, optimizer eps), each against Megatron-LM d98e8a64 (.megatron).
#   source results/gpu-logs/megatron-values/call2.sh
source ci/device-steps.sh call2.tgz logs
after_step() { cp "$OUT"/mp/*.txt "$L"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
step aa-noise bash ci/megatron-pair.sh .megatron "$OUT/mp" aa-noise
step below-print bash ci/megatron-pair.sh .megatron "$OUT/mp" bad-lr-below-print bad-eps-below-print

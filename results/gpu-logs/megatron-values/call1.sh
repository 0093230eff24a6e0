# Device call 1 for docs/megatron.md's exact-values section: the GPU build of loopgate and its sync counter, then
# `loopgate pair` on Megatron-LM d98e8a64 (.megatron, carried) for the good candidate (2 runs a side, one NaN
# injection) and a nondeterministic A/A pair. Run from the repository root by the device tool:
#   source results/gpu-logs/megatron-values/call1.sh
source ci/device-steps.sh call1.tgz logs
after_step() {
  cp "$OUT"/mp/*.txt "$L"/ 2>/dev/null
  for f in "$OUT"/mp/*/baseline-1/values.0.json; do [ -f "$f" ] && cp "$f" "$L/$(basename "$(dirname "$(dirname "$f")")")-baseline-1-values.json"; done
  true
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
step good-candidate env GOOD_RUNS=2 GOOD_INJECT=iter=4,site=loss bash ci/megatron-pair.sh .megatron "$OUT/mp" good-candidate
step aa-noise bash ci/megatron-pair.sh .megatron "$OUT/mp" aa-noise

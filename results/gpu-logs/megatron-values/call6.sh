# Device call 6: the restart row on Megatron-LM d98e8a64 (16 iterations, saved at 8): the good candidate against
# the baseline (each arm saved and loaded, the candidate loading the baseline's checkpoint) and bad-rng-not-restored,
# the two pairs side by side on the one GPU (their values are exact, their timings are not compared); then, alone on
# the GPU, the counter's overhead inside one run (loopgate syncs --overhead-ab, 300 iterations) with the shim
# recording the exact values.
#   source results/gpu-logs/megatron-values/call6.sh
source ci/device-steps.sh call6.tgz logs
after_step() { cp "$OUT"/mp-good/*.txt "$L"/ 2>/dev/null; cp "$OUT"/mp-rng/*.txt "$L"/ 2>/dev/null; true; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt" 2>&1
step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
restarts() {
  MEGATRON_ITERS=16 RESUME_AT=8 GOOD_RUNS=1 GOOD_INJECT=" " MASTER_PORT=29517 \
    bash ci/megatron-pair.sh .megatron "$OUT/mp-good" good-candidate > "$L/restart-good.log" 2>&1 &
  local pa=$!
  MEGATRON_ITERS=16 RESUME_AT=8 MASTER_PORT=29617 \
    bash ci/megatron-pair.sh .megatron "$OUT/mp-rng" bad-rng-not-restored > "$L/restart-rng.log" 2>&1 &
  local pb=$! a=0 b=0
  wait $pa || a=$?; wait $pb || b=$?
  echo "good-candidate exit $a, bad-rng-not-restored exit $b"; [ $a = 0 ] && [ $b = 0 ]
}
step restarts restarts
mkdir -p "$OUT/values-ab"
step overhead-ab env LOOPGATE_VALUES_DIR="$OUT/values-ab" AB_ITERS=300 bash ci/megatron-syncs.sh .megatron "$OUT/ab" ab
ls "$OUT/values-ab" >> "$L/overhead-ab.log" 2>&1

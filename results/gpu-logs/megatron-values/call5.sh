# Device call 5, on call 4's warm machine with the session's last 245 s of device time: the restart row on the good
# candidate (1 run a side, 16 iterations, saved at 8). The command, as given to the device tool:
#   source ci/device-steps.sh call5.tgz logs; step build bash ci/gpu-build.sh loopgate loopgate_sync_inject
#   step restart env MEGATRON_ITERS=16 RESUME_AT=8 GOOD_RUNS=1 GOOD_INJECT=" " bash ci/megatron-pair.sh .megatron \
#     "$OUT/mp" good-candidate
# It was cut at its 230 s limit before the seventh run (the candidate loading the baseline's checkpoint) and the
# verdict: restart-cut-short.txt holds what the pair printed until then.

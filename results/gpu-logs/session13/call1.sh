#!/usr/bin/env bash
# Session 13, device call 1 (one H200), the tree of 9c75b8b: the build (first GPU build of bb68af1's
# digests_cuda.cpp); where the digests' host time goes on this host (perf, when the runner has it); the digests'
# cost on a tiny model (host only), on the miniature, and at 4096x4x2048, where device work should bound the step
# (profile first). Logs packed into $OUT/call1.tgz after every step.
source ci/device-steps.sh call1.tgz
step build env RESULTS=$L/build bash ci/gpu-build.sh
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
step tools bash -c 'which perf nsys gdb; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv'
TINY="--hidden-size 64 --num-attention-heads 4 --seq-length 16"
BIG=$(lg_model_flags 4096x4x2048)
step profile_big_zerosync timeout 90 $B run --device cuda --arm zerosync --iters 8 --log-interval 4 --profile --quiet $BIG
step ab_digests_tiny timeout 70 $B ab --device cuda --arms baseline,baseline:digests --phases 9 --phase-iters 10 $TINY
step ab_digests_big_zerosync timeout 150 $B ab --device cuda --arms zerosync,zerosync:digests --phases 7 --phase-iters 4 --log-interval 4 $BIG
step ab_digests_big_baseline timeout 150 $B ab --device cuda --arms baseline,baseline:digests --phases 7 --phase-iters 4 $BIG
if which perf > /dev/null 2>&1; then
  step perf_record timeout 120 perf record -F 499 --call-graph dwarf,16384 -o /tmp/lg.perf $B run --device cuda --arm baseline --iters 40 --digests --quiet
  step perf_report bash -c 'perf report -i /tmp/lg.perf --children --sort symbol --percent-limit 0.3 --stdio -g none 2>/dev/null | head -300'
fi

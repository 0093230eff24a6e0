#!/usr/bin/env bash
# Session 17, device call 4 (one H200): call 3 again on the fixed code (the warm-up tensor's requires_grad): build
# the new tree and eec52f2 side by side, `bash ci/gpu.sh` on the new one, then the baseline LR scenarios
# (LrScheduleCase.*, 14 x 200 iterations of the tiny model) old and new alternating, while the call's time allows.
source ci/device-steps.sh call4.tgz
source ci/gpu-env.sh
T0=$(date +%s)
NEW=$PWD OLD=/tmp/old
mkdir -p $OLD && tar xzf .vendor/abtree-eec52f2.tar.gz -C $OLD
build_both() {
  (cd $OLD && RESULTS=$L/build_old bash ci/gpu-build.sh loopgate_gates) > $L/build_old.out 2>&1 &
  RESULTS=$L/build bash ci/gpu-build.sh > $L/build_new.out 2>&1
  wait
  tail -2 $L/build_old.out $L/build_new.out
  test -x $OLD/build/gpu/suites/loopgate_gates && test -x $NEW/build/gpu/tools/loopgate
}
step build build_both
step gpu_sh timeout 230 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
ab() {
  for round in 1 2 3; do
    [ $(( $(date +%s) - T0 )) -gt 330 ] && { echo "round $round not run: $(( $(date +%s) - T0 )) s used"; break; }
    for arm in old new; do
      dir=$OLD; [ $arm = new ] && dir=$NEW
      t0=$(date +%s%N)
      (cd $dir && LOOPGATE_GOLDEN_DIR=$dir/golden mpiexec -n 1 build/gpu/suites/loopgate_gates --lg_fixture=single \
        --lg_device=cuda --gtest_filter='LrScheduleCase.*') > $L/ab_${arm}_$round.log 2>&1
      rc=$?
      echo "round $round $arm rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
    done
  done
}
step ab ab

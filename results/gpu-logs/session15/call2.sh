#!/usr/bin/env bash
# Session 15, device call 2 (one H200): an alternating A/B of the GPU gate suites, before (fa1267d, session 14's last
# tree) and after (cf04e25: the flat optimizer, the counter's name table, the LR cases' single microbatch), in one
# call: both trees' loopgate_gates built side by side, then 4 rounds of A then B on the same subset
# (`LrScheduleCase.*:Arms/Collectives.*:CollectivesBaseline.*`, single, --lg_device=cuda), wall seconds per launch.
# The old tree travels as abtree-fa1267d.tar.gz (`git archive fa1267d`, not committed).
source ci/device-steps.sh call2.tgz
source ci/gpu-env.sh
NEW=$PWD OLD=/tmp/old
mkdir -p $OLD && tar xzf abtree-fa1267d.tar.gz -C $OLD
build_both() {
  (cd $OLD && RESULTS=$L/build_old bash ci/gpu-build.sh loopgate_gates) > $L/build_old.out 2>&1 &
  (cd $NEW && RESULTS=$L/build_new bash ci/gpu-build.sh loopgate_gates) > $L/build_new.out 2>&1
  wait
  cat $L/build_old.out $L/build_new.out
  test -x $OLD/build/gpu/suites/loopgate_gates && test -x $NEW/build/gpu/suites/loopgate_gates
}
step build build_both
F='LrScheduleCase.*:Arms/Collectives.*:CollectivesBaseline.*'
ab() {
  for round in 1 2 3 4; do
    for arm in old new; do
      dir=$OLD; [ $arm = new ] && dir=$NEW
      t0=$(date +%s%N)
      (cd $dir && LOOPGATE_GOLDEN_DIR=$dir/golden mpiexec -n 1 build/gpu/suites/loopgate_gates --lg_fixture=single \
        --lg_device=cuda --gtest_filter="$F") > $L/ab_${arm}_$round.log 2>&1
      rc=$?
      echo "round $round $arm rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
    done
  done
}
step ab ab

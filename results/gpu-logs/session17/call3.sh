#!/usr/bin/env bash
# Session 17, device call 3 (one H200), tree 7767b81 (the session's GPU code: ranks clear CUBLAS_WORKSPACE_CONFIG
# after their first cuBLAS calls): build it and eec52f2 (the code before; .vendor/abtree-eec52f2.tar.gz, from
# `git archive`) side by side; `bash ci/gpu.sh` on the new tree (the gate's golden_values row checks the GPU bits
# against golden/single/golden_values_cuda.json); then the LR scenarios and the clean-run equivalence rows, old and
# new alternating, three rounds (wall ms per run).
source ci/device-steps.sh call3.tgz
source ci/gpu-env.sh
T0=$(date +%s)
NEW=$PWD OLD=/tmp/old
mkdir -p $OLD && tar xzf .vendor/abtree-eec52f2.tar.gz -C $OLD
build_both() {
  (cd $OLD && LOOPGATE_VENDOR_DIR=$NEW/.vendor RESULTS=$L/build_old bash ci/gpu-build.sh loopgate_gates) > $L/build_old.out 2>&1 &
  RESULTS=$L/build bash ci/gpu-build.sh > $L/build_new.out 2>&1
  wait
  tail -3 $L/build_old.out $L/build_new.out
  test -x $OLD/build/gpu/suites/loopgate_gates && test -x $NEW/build/gpu/suites/loopgate_gates
}
step build build_both
step gpu_sh timeout 300 env RESULTS=$L/gpu NO_BUILD=1 bash ci/gpu.sh
F='*LrSchedule*:Arms/Equivalence.*'
ab() {
  for round in 1 2 3; do
    [ $(( $(date +%s) - T0 )) -gt 470 ] && { echo "round $round not run: $(( $(date +%s) - T0 )) s used"; break; }
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

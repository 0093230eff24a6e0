#!/usr/bin/env bash
# Session 12, device call 4 (one H200): record the GPU golden run's digests, golden/single/digests_cuda.json, with
# `loopgate golden --update --device cuda --fixture single` (it rewrites that fixture's *_cuda.json; the values and
# environment must come back unchanged: the diff against a copy taken before shows it), then the golden_values tests on the GPU with the
# file in place: the power test now also requires the localization. Logs and the golden files come back in call4.tgz.
mkdir -p $OUT/golden/single
after_step() { cp golden/single/*_cuda.json $OUT/golden/single/ 2>/dev/null; }
source ci/device-steps.sh call4.tgz logs golden
step build env RESULTS=$L/build bash ci/gpu-build.sh loopgate loopgate_gates  # the two it runs: the device time left is short
source ci/gpu-env.sh
B=build/gpu/tools/loopgate
cp -r golden/single /tmp/golden_single_before
step golden_update timeout 60 $B golden --update --device cuda --fixture single
step golden_diff diff -r /tmp/golden_single_before golden/single
step golden_values_tests timeout 60 mpirun -n 1 build/gpu/suites/loopgate_gates --lg_fixture=single --lg_device=cuda --gtest_filter='GoldenValues.*:GatePower.GoldenValues*'

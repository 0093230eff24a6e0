#!/usr/bin/env bash
# Device call 5 of 2026-12-06 (one GPU), on the tree of the session's last code commit:
# - the GPU build with no GoogleTest, nlohmann-json or CLI11 installed and no vendor folder: FetchContent, its sources
#   given by FETCHCONTENT_SOURCE_DIR_* (this machine reaches no network); first, what the image has of the three;
# - `loopgate selftest --section defects --device cuda` on that build (the planted defects added since 89d2e31);
# - the counter's overhead with the recording on, 300 iterations of Megatron-LM inside one run (loopgate syncs
#   --overhead-ab), judged by the landed statistic.
source ci/device-steps.sh call5.tgz logs ab
unset LOOPGATE_VENDOR_DIR
export FETCHCONTENT_SOURCE_DIR_GOOGLETEST=$PWD/.vendor/googletest
export FETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=$PWD/.vendor/src/json FETCHCONTENT_SOURCE_DIR_CLI11=$PWD/.vendor/src/cli11
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/gpu.txt 2>&1
deps() {
  cmake --version | head -1
  for h in gtest/gtest.h nlohmann/json.hpp CLI/CLI.hpp; do
    found=$(find /usr /opt -path "*/include/$h" 2>/dev/null | grep -v site-packages | head -3)
    echo "$h: ${found:-not installed}"
  done
  for c in GTestConfig.cmake nlohmann_jsonConfig.cmake CLI11Config.cmake; do
    found=$(find /usr /opt -name "$c" 2>/dev/null | head -3)
    echo "$c: ${found:-not installed}"
  done
}
step deps deps
step build env RESULTS=$L/build bash ci/gpu-build.sh
grep "loopgate:" $L/build/configure.log > $L/configure_deps.txt
step selftest_cuda timeout 200 build/gpu/tools/loopgate selftest --section defects --device cuda --json $L/selftest_cuda.json
mkdir -p "$OUT/values-ab"
step overhead_ab env LOOPGATE_VALUES_DIR="$OUT/values-ab" AB_ITERS=300 bash ci/megatron-syncs.sh .megatron "$OUT/ab" ab
ls "$OUT/values-ab" >> "$L/overhead_ab.log" 2>&1
cp "$OUT"/ab/syncs-ab.json "$L/" 2>/dev/null; true

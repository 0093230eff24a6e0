#!/usr/bin/env bash
# Device call 6 of 2026-12-06 (one GPU; call 5 found GoogleTest, nlohmann-json and CLI11 installed on the image): the
# three packages removed from the machine (dpkg), then a fresh GPU configure and build of `loopgate` and
# every target by FetchContent from the sources named by FETCHCONTENT_SOURCE_DIR_* (no network here); a few unit
# tests; the gate's equivalence and timers checks on single (the gate's launches through tools/loopgate/process.h);
# `loopgate pair` on Megatron-LM, the good candidate, one run a side (pair's runs through the same launcher).
source ci/device-steps.sh call6.tgz
unset LOOPGATE_VENDOR_DIR
export LOOPGATE_TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
export FETCHCONTENT_SOURCE_DIR_GOOGLETEST=$PWD/.vendor/googletest
export FETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=$PWD/.vendor/src/json FETCHCONTENT_SOURCE_DIR_CLI11=$PWD/.vendor/src/cli11
remove() {
  dpkg -l | grep -E "googletest|libgtest|libgmock|nlohmann|cli11" | awk '{print $2, $3}'
  dpkg --purge --force-depends googletest libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev 2>&1 | tail -5
  for f in /usr/include/gtest /usr/include/nlohmann /usr/include/CLI /usr/src/googletest \
           /usr/lib/x86_64-linux-gnu/cmake/GTest /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11; do
    [ -e "$f" ] && echo "still there: $f" || echo "gone: $f"
  done
}
step remove remove
step configure cmake --preset gpu -B build/gpu-fetch -DPython3_EXECUTABLE=$(command -v python3) \
  -DLOOPGATE_TORCH_NCCL_DIR=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])') \
  -DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=$FETCHCONTENT_SOURCE_DIR_GOOGLETEST \
  -DFETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=$FETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON \
  -DFETCHCONTENT_SOURCE_DIR_CLI11=$FETCHCONTENT_SOURCE_DIR_CLI11
step build cmake --build build/gpu-fetch -j "$(nproc)"
step unit build/gpu-fetch/suites/loopgate_unit --gtest_filter='Stats.*:Golden*'
source ci/gpu-env.sh
export LOOPGATE_GOLDEN_DIR=$PWD/golden
step gate_single timeout 200 build/gpu-fetch/tools/loopgate gate --device cuda --fixture single --check equivalence,timers --json $L/gate_single.json
step pair_good env LOOPGATE=build/gpu-fetch/tools/loopgate GOOD_RUNS=1 bash ci/megatron-pair.sh .megatron "$OUT/mp-good" good-candidate
cp "$OUT"/mp-good/*.txt "$L"/ 2>/dev/null; true

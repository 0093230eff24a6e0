#!/usr/bin/env bash
# The one GPU build: configure with the gpu preset (LibTorch CUDA from the runner's PyTorch, NCCL from its
# site-packages/nvidia/nccl when present, CUPTI from the toolkit) and build every target, or the targets named.
# Every GPU script builds through this one (ci/gpu.sh, gpu-gates, gpu-graph, gpu-measure).
#   bash ci/gpu-build.sh [TARGET ...]
#   LOOPGATE_VENDOR_DIR=/path bash ci/gpu-build.sh    # a runner image without gtest / nlohmann / CLI11 packages
#   FETCHCONTENT_SOURCE_DIR_GOOGLETEST=/src/googletest FETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=/src/json \
#     FETCHCONTENT_SOURCE_DIR_CLI11=/src/CLI11 bash ci/gpu-build.sh   # neither, and no network (ctest/LoopgateDeps.cmake)
# Output: configure and build logs under ${RESULTS:-build/gpu/results}; on failure their tail, exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
R="${RESULTS:-build/gpu/results}"
mkdir -p "$R"
export LOOPGATE_TORCH_PREFIX="${LOOPGATE_TORCH_PREFIX:-$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')}"
nccl_dir="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)"
extra=()
[ -n "$nccl_dir" ] && extra+=("-DLOOPGATE_TORCH_NCCL_DIR=$nccl_dir")
# The sync counter's frame walker reads the frames of the Python that runs the user's program: this one.
extra+=("-DPython3_EXECUTABLE=$(command -v python3)")
[ -n "${LOOPGATE_VENDOR_DIR:-}" ] && extra+=("-DLOOPGATE_VENDOR_DIR=$LOOPGATE_VENDOR_DIR")
for v in $(compgen -e | grep '^FETCHCONTENT_SOURCE_DIR_' || true); do extra+=("-D$v=${!v}"); done
cmake --preset gpu "${extra[@]}" > "$R/configure.log" 2>&1 || { tail -40 "$R/configure.log"; exit 1; }
start=$(date +%s)
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build --preset gpu -j "$(nproc)" "${targets[@]}" > "$R/build.log" 2>&1 ||
  { grep -E 'error' -A3 "$R/build.log" | head -60; tail -20 "$R/build.log"; exit 1; }
echo "gpu-build: built in $(( $(date +%s) - start )) s (log $R/build.log)"

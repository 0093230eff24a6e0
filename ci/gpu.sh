#!/usr/bin/env bash
# GPU runner: configure with the gpu preset (LibTorch CUDA from the runner's PyTorch, NCCL from its
# site-packages/nvidia/nccl, CUPTI from the toolkit), build, and run the tests labelled gpu with one GPU per rank
# through CTest resource groups, on a runner of any size: tests that need more GPUs than the runner has (label
# gpusN) are left out with one line per N (ci/gpu-select.sh), and no GPU at all is a failure. The resource spec
# lists the GPUs this runner has (ci/gpu-resources.json is the two-GPU example; a spec is generated otherwise).
#   ci/gpu.sh                 # configure + build + ctest -L gpu
#   LOOPGATE_VENDOR_DIR=/path ci/gpu.sh   # runner image without gtest/nlohmann/CLI11 packages
#   DRY_RUN=1 [BUILD_DIR=build/gpu] ci/gpu.sh   # no build, no run: what this runner would run, on a configured tree
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/gpu-select.sh
B="${BUILD_DIR:-build/gpu}"

# Ranks run as root in runner containers; NVLink multicast stays off (shared hosts); NCCL pinned for bitwise tests.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_ALGO="${NCCL_ALGO:-Ring}" NCCL_PROTO="${NCCL_PROTO:-Simple}" CUBLAS_WORKSPACE_CONFIG=:4096:8

if [ "${DRY_RUN:-0}" != 1 ]; then
  export LOOPGATE_TORCH_PREFIX="${LOOPGATE_TORCH_PREFIX:-$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')}"
  NCCL_DIR="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
  extra=()
  [ -n "$NCCL_DIR" ] && extra+=("-DLOOPGATE_TORCH_NCCL_DIR=$NCCL_DIR")
  [ -n "${LOOPGATE_VENDOR_DIR:-}" ] && extra+=("-DLOOPGATE_VENDOR_DIR=$LOOPGATE_VENDOR_DIR")
  cmake --preset gpu "${extra[@]}"
  cmake --build --preset gpu -j "$(nproc)"
fi

ngpu="$(lg_gpu_count)"
if [ "$ngpu" -lt 1 ]; then
  smi=$( (nvidia-smi -L 2>&1 || true) | head -1)
  echo "gpu.sh: no GPU visible (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES-<unset>}'; nvidia-smi -L: '${smi}')" >&2
  exit 1
fi
lg_ctest_gpu_filter "$B" "$ngpu"
spec="$PWD/ci/gpu-resources.json"
if [ "$ngpu" != 2 ]; then
  spec="$(cd "$B" && pwd)/gpu-resources.json"
  python3 - "$ngpu" > "$spec" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"version": {"major": 1, "minor": 0},
                  "local": [{"gpus": [{"id": str(i), "slots": 1} for i in range(n)]}]}))
PY
fi
cmd=(ctest --test-dir "$B" -L gpu "${LG_CTEST_FILTER[@]}" --resource-spec-file "$spec" -j "$ngpu" --output-on-failure)
if [ "${DRY_RUN:-0}" = 1 ]; then
  echo "gpu.sh: $ngpu GPU(s); would run: ${cmd[*]} ${CTEST_ARGS:-}"
  "${cmd[@]}" -N ${CTEST_ARGS:-} | grep -E '^ *Test +#|^Total Tests'
  exit 0
fi
"${cmd[@]}" ${CTEST_ARGS:-}

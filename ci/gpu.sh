#!/usr/bin/env bash
# GPU runner: configure with the gpu preset (LibTorch CUDA from the runner's PyTorch, NCCL from its
# site-packages/nvidia/nccl, CUPTI from the toolkit), build, and run the tests labelled gpu with one GPU per rank
# through CTest resource groups. The resource spec lists the GPUs this runner has (ci/gpu-resources.json is the
# two-GPU example; a spec is generated from nvidia-smi when the count differs).
#   ci/gpu.sh                 # configure + build + ctest -L gpu
#   LOOPGATE_VENDOR_DIR=/path ci/gpu.sh   # runner image without gtest/nlohmann/CLI11 packages
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOPGATE_TORCH_PREFIX="${LOOPGATE_TORCH_PREFIX:-$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')}"
NCCL_DIR="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
# Ranks run as root in runner containers; NVLink multicast stays off (shared hosts); NCCL pinned for bitwise tests.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_ALGO="${NCCL_ALGO:-Ring}" NCCL_PROTO="${NCCL_PROTO:-Simple}" CUBLAS_WORKSPACE_CONFIG=:4096:8

extra=()
[ -n "$NCCL_DIR" ] && extra+=("-DLOOPGATE_TORCH_NCCL_DIR=$NCCL_DIR")
[ -n "${LOOPGATE_VENDOR_DIR:-}" ] && extra+=("-DLOOPGATE_VENDOR_DIR=$LOOPGATE_VENDOR_DIR")
cmake --preset gpu "${extra[@]}"
cmake --build --preset gpu -j "$(nproc)"

ngpu="$(nvidia-smi -L | wc -l)"
spec="$PWD/ci/gpu-resources.json"
if [ "$ngpu" != 2 ]; then
  spec="$PWD/build/gpu/gpu-resources.json"
  python3 - "$ngpu" > "$spec" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"version": {"major": 1, "minor": 0},
                  "local": [{"gpus": [{"id": str(i), "slots": 1} for i in range(n)]}]}))
PY
fi
ctest --test-dir build/gpu -L gpu --resource-spec-file "$spec" -j "$ngpu" --output-on-failure ${CTEST_ARGS:-}

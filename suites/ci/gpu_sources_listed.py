#!/usr/bin/env python3
"""Every GPU-tier source of the trainer is built by the GPU tier (CTest gpu_sources_listed).

The CPU build leaves out trainer files named cupti_*.cpp, comm_nccl.cpp and *_cuda.cpp (CMakeLists.txt); the GPU
tier adds them back by name (ctest/LoopgateCuda.cmake). A new one that is not named there compiles nowhere and
fails only at a GPU runner's link, minutes into a device session. This check fails on CPU instead.
  gpu_sources_listed.py ROOT [--plant trainer/x/new_cuda.cpp]   # the plant: a file that is not listed
"""
import os
import re
import sys

ROOT = sys.argv[1]
PLANT = sys.argv[3] if len(sys.argv) >= 4 and sys.argv[2] == "--plant" else None
GPU_ONLY = re.compile(r"/(cupti_[a-z_]*|comm_nccl|[a-z_]*_cuda)\.cpp$")


def main():
    found = []
    for base, _, files in os.walk(os.path.join(ROOT, "trainer")):
        for f in files:
            rel = os.path.relpath(os.path.join(base, f), ROOT).replace(os.sep, "/")
            if GPU_ONLY.search("/" + rel):
                found.append(rel)
    if PLANT:
        found.append(PLANT)
    cmake = open(os.path.join(ROOT, "ctest", "LoopgateCuda.cmake")).read()
    missing = [f for f in sorted(found) if f not in cmake]
    print(f"gpu sources: {len(found)} GPU-tier files under trainer/")
    for f in missing:
        print(f"FAIL {f} is left out of the CPU build but not added by ctest/LoopgateCuda.cmake")
    if not found:
        print("FAIL no GPU-tier file found: the pattern no longer matches the tree")
    return 1 if missing or not found else 0


if __name__ == "__main__":
    sys.exit(main())

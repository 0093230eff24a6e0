#!/usr/bin/env bash
# The README's main-job command: installs dependencies, builds, and runs `loopgate gate` on its CPU default
# (every CPU fixture, every default candidate arm). Extra arguments go to `loopgate gate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps-cpu.sh
export CCACHE_SLOPPINESS=pch_defines,time_macros
cmake --preset cpu >/dev/null
cmake --build --preset cpu
exec build/cpu/tools/loopgate gate "$@"

#!/usr/bin/env bash
# Fuzzes loopgate's parsers for a fixed time each (suites/fuzz, docs/fuzzing.md): configures the cpu-fuzz preset
# (clang, libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer), builds only the fuzz targets (no LibTorch),
# and runs each for LOOPGATE_FUZZ_SECONDS (default 20) from its seed corpus, two at a time. Any crash, sanitizer
# report, leak, timeout or violated property fails; the input that did it is saved under
# build/cpu-fuzz/suites/fuzz/artifacts/<target>/ (the path is printed). Called by ci/test-cpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_SLOPPINESS=pch_defines,time_macros
seconds=${LOOPGATE_FUZZ_SECONDS:-20}
start=$(date +%s)
cmake --preset cpu-fuzz -DLOOPGATE_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build --preset cpu-fuzz
built=$(date +%s)
ctest --preset cpu-fuzz
echo "fuzz: build $((built - start)) s, ${seconds} s per target, runs $(( $(date +%s) - built )) s"

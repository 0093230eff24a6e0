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
rc=0
ctest --preset cpu-fuzz || rc=$?
# One line per target from libFuzzer's final stats in CTest's full log: inputs run, executions per second,
# coverage (edges), corpus (inputs/bytes, seeds and what this run added).
log=build/cpu-fuzz/Testing/Temporary/LastTest.log
awk '/^[0-9]+\/[0-9]+ Test: /  { name = $3 }
     /stat::number_of_executed_units/ { runs[name] = $2 }
     /stat::average_exec_per_sec/     { rate[name] = $2 }
     /DONE +cov:/ { for (i = 1; i <= NF; i++) { if ($i == "cov:") cov[name] = $(i + 1); if ($i == "corp:") corp[name] = $(i + 1) } }
     END { for (n in runs) printf "fuzz: %-20s %9d inputs, %6d exec/s, cov %s, corpus %s\n", n, runs[n], rate[n], cov[n], corp[n] }' \
  "$log" | sort
echo "fuzz: build $((built - start)) s, ${seconds} s per target, runs $(( $(date +%s) - built )) s"
exit "$rc"

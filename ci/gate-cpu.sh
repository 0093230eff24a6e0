#!/usr/bin/env bash
# The README's main-job command: installs dependencies, builds, runs `loopgate gate` on its CPU default (every CPU
# fixture, every default candidate arm), then writes the HTML report of that run (`loopgate report`). Extra
# arguments go to `loopgate gate`; the gate's JSON goes to build/cpu/gate/gate.json unless they name a --json of
# their own. Exit code: the gate's (0 pass / 1 fail / 2 bad input). Last line: the report's absolute path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/deps-cpu.sh
export CCACHE_SLOPPINESS=pch_defines,time_macros
cmake --preset cpu >/dev/null
cmake --build --preset cpu
mkdir -p build/cpu/gate
json=build/cpu/gate/gate.json
json_args=(--json "$json")
prev=""
for a in "$@"; do  # the user's own --json wins, and the report reads it
  case "$a" in
    --json=*) json=${a#--json=}; json_args=() ;;
    *) [ "$prev" = "--json" ] && { json=$a; json_args=(); } ;;
  esac
  prev=$a
done
rm -f "$json"
set +e
build/cpu/tools/loopgate gate "${json_args[@]}" "$@"
rc=$?
set -e
if [ ! -s "$json" ]; then  # bad input (exit 2) or --help: nothing to report
  exit "$rc"
fi
if build/cpu/tools/loopgate report --gate "$json" --out build/cpu/gate/report.html; then
  readlink -f build/cpu/gate/report.html
else
  echo "gate-cpu: loopgate report failed; the gate's verdict (exit $rc) stands" >&2
fi
exit "$rc"

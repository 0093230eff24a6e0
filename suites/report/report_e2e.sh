#!/usr/bin/env bash
# CTest report_e2e: a small real gate run, its report, and check_report verifying the page against the gate JSON
# and Traces. The gate runs `syncfree` and the planted defect `defect-numerics` as candidates on `single`, so
# the page must show a failed check with its first differing value; the gate must therefore exit 1.
# Usage: report_e2e.sh LOOPGATE CHECK_REPORT OUT_DIR   (OUT_DIR/report.html is what report_browser renders)
set -uo pipefail
loopgate=$1 check=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
SECONDS=0
"$loopgate" gate --fixture single --check equivalence,sync_budget --arm syncfree,defect-numerics \
  --json "$out/gate.json" > "$out/gate.log" 2>&1
rc=$?
tail -n 6 "$out/gate.log"
if [ "$rc" -ne 1 ]; then
  echo "report_e2e: FAIL: the gate exited $rc; expected 1 (defect-numerics must fail equivalence). Log: $out/gate.log"
  exit 1
fi
"$loopgate" report --gate "$out/gate.json" --out "$out/report.html" || { echo "report_e2e: FAIL: loopgate report"; exit 1; }
"$check" --gate "$out/gate.json" --html "$out/report.html" --require-clean-traces || exit 1
echo "report_e2e: OK in ${SECONDS} s"

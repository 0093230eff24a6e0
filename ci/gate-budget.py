#!/usr/bin/env python3
"""The gate's time against its budget: reads CTest's last run (BUILD/Testing/Temporary/LastTest.log) and prints,
for each test the budget file names, its seconds, its budget and whether it kept it, then the five gate fixtures'
sum and every test's sum against the issue's targets. A benchmark's report, not a test: it exits 0 whatever the
times (2 when it cannot read its inputs), so a slow runner never fails CI; the figure is in CI's log.

    python3 ci/gate-budget.py build/cpu [ci/gate-budget.json]

The budget file changes only in a commit that says why (its "why" says what the figures are)."""
import json
import os
import re
import sys

HEADER = re.compile(r"^\d+/\d+ Test: (\S+)$")
TIME = re.compile(r"^Test time = +([0-9.]+) sec$")


def test_times(log):
    times, name = {}, None
    with open(log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = HEADER.match(line)
            if m:
                name = m.group(1)
                continue
            m = TIME.match(line)
            if m and name:
                times[name] = float(m.group(1))
                name = None
    return times


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-3].strip(), file=sys.stderr)
        return 2
    log = os.path.join(sys.argv[1], "Testing", "Temporary", "LastTest.log")
    budget_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(__file__), "gate-budget.json")
    if not os.path.isfile(log):
        print(f"gate-budget: {log}: no CTest run to read", file=sys.stderr)
        return 2
    budget = json.load(open(budget_path))
    times = test_times(log)
    print(f"gate-budget: CTest's last run ({log}) against {budget_path}")
    print(f"{'test':<32} {'seconds':>8} {'budget':>8}  verdict")
    for name, limit in budget["budgets_s"].items():
        if name not in times:
            print(f"{name:<32} {'-':>8} {limit:>8}  not run")
            continue
        verdict = "within" if times[name] <= limit else f"OVER by {times[name] - limit:.1f} s"
        print(f"{name:<32} {times[name]:>8.1f} {limit:>8}  {verdict}")
    gates = [times[n] for n in times if n in ("gate_single", "gate_tp2sp", "gate_pp2", "gate_dp64", "gate_pp2tp2dp2")]
    targets = budget["targets"]
    print(f"the five gate fixtures: {sum(gates):.1f} s (target {targets['gate_total_s']} s); every test's own time: "
          f"{sum(times.values()):.1f} s over {len(times)} tests (target for CI's tests {targets['ci_tests_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where the CPU gate's wall time goes: runs `loopgate gate` (its arguments passed through) with `vmstat` sampling
the machine every second, then measures each fixture's bare launch (mpiexec, the ranks' start-up with LibTorch
loaded, MPI init and teardown, no test), and prints one table per question:

  per fixture  wall, bare launch, the scenarios' own run time (training, trace written), the rest (wall less
               those two: the checks, comparisons, collective waits, progress polls), CPU user / system / idle
  per suite    the tests' summed time on the first rank (a suite's first test pays for the scenarios it shares)
  per scenario runs and their summed run time; the planted-defect arms' share

    python3 ci/gate-profile.py [--out DIR] [--loopgate PATH] [--mpiexec PATH] -- [gate flags...]

Stdlib only. The numbers come from the gate's own JSON and logs (rank 0's gtest lines and the `loopgate scenario:`
lines) and from vmstat; nothing is estimated. Source ci/mpi-env.sh first, as for any CPU launch."""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

TEST_LINE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+?)(?:, where .*)? \((\d+) ms\)$")
SCENARIO_LINE = re.compile(r"^loopgate scenario: (.*?) arm (\S+): .*?, ([0-9.]+) s, trace written in ([0-9.]+) ms")


def vmstat_means(samples, t0, t1):
    """Mean user, system and idle percent of the vmstat samples taken in [t0, t1]."""
    rows = [s for s in samples if t0 <= s[0] <= t1]
    if not rows:
        return None
    n = len(rows)
    return tuple(sum(r[i] for r in rows) / n for i in (1, 2, 3))


def read_vmstat(path):
    """(unix time, us, sy, id) per line of `vmstat -n -t 1` (its last two columns are the date and the time)."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 17 or not parts[0].isdigit():
                continue
            stamp = time.mktime(time.strptime(parts[-2] + " " + parts[-1], "%Y-%m-%d %H:%M:%S"))
            # procs r b, memory x4, swap x2, io x2, system x2, cpu us sy id wa st
            out.append((stamp, float(parts[12]), float(parts[13]), float(parts[14])))
    return out


def parse_log(path):
    tests, scenarios = [], []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = TEST_LINE.match(line)
            if m:
                tests.append((m.group(2), m.group(1), int(m.group(3)) / 1000.0))
                continue
            m = SCENARIO_LINE.match(line)
            if m:
                scenarios.append((m.group(1), m.group(2), float(m.group(3)) + float(m.group(4)) / 1000.0))
    return tests, scenarios


def suite_of(test):
    name = test.split("/")[1] if test.startswith("Arms/") else test
    return name.split(".")[0]


def bare_launch(mpiexec, exe, fixture, np):
    start = time.monotonic()
    subprocess.run(f"{mpiexec} -n {np} {exe} --lg_fixture={fixture} '--gtest_filter=NoSuchSuite.NoSuchTest'",
                   shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gate-profile")
    ap.add_argument("--loopgate", default="build/cpu/tools/loopgate")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("gate_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    gate_args = [x for x in a.gate_args if x != "--"]
    if not os.access(a.loopgate, os.X_OK):
        print(f"gate-profile: --loopgate {a.loopgate}: not an executable file", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    exe = os.path.join(os.path.dirname(os.path.abspath(a.loopgate)), "..", "suites", "loopgate_gates")
    if "--suites-exe" in gate_args[:-1]:  # the bare launches start the suites the gate runs
        exe = gate_args[gate_args.index("--suites-exe") + 1]

    vm_path = os.path.join(a.out, "vmstat.txt")
    vm = subprocess.Popen(["vmstat", "-n", "-t", "1"], stdout=open(vm_path, "w"))
    gate_json = os.path.join(a.out, "gate.json")
    t_start = time.time()
    rc = subprocess.run([a.loopgate, "gate", "--json", gate_json, "--mpiexec", a.mpiexec] + gate_args,
                        stdout=open(os.path.join(a.out, "gate.txt"), "w"), stderr=subprocess.STDOUT).returncode
    t_end = time.time()
    vm.terminate()
    vm.wait()
    samples = read_vmstat(vm_path)
    g = json.load(open(gate_json))

    print(f"gate: exit {rc}, {g['seconds']:.1f} s wall ({t_end - t_start:.1f} s with the profile's start)")
    whole = vmstat_means(samples, t_start, t_end)
    if whole:
        print(f"CPU over the gate: user {whole[0]:.0f} %, system {whole[1]:.0f} %, idle {whole[2]:.0f} %")
    print()
    print("| fixture | ranks | wall s | bare launch s | scenarios s | rest s | user % | system % | idle % |")
    print("|---|---|---|---|---|---|---|---|---|")
    suites = defaultdict(float)
    scen = defaultdict(lambda: [0, 0.0])
    defect_s = total_scen_s = 0.0
    t = t_start
    for f in g["fixtures"]:
        tests, scenarios = [], []
        # A fixture split into shards (single, on 2 cores) has a log per shard: its runs are all of them.
        shard_logs = sorted(glob.glob(re.sub(r"\.shard\d+\.log$", ".shard*.log", f["log"])))
        for log in shard_logs or [f["log"]]:
            t_log, s_log = parse_log(log)
            tests += t_log
            scenarios += s_log
        for name, _, s in tests:
            suites[(f["fixture"], suite_of(name))] += s
        run_s = sum(s for _, _, s in scenarios)
        for name, arm, s in scenarios:
            scen[(f["fixture"], name)][0] += 1
            scen[(f["fixture"], name)][1] += s
            total_scen_s += s
            if arm.startswith("defect-"):
                defect_s += s
        # Fixtures run one after another where the gate has 2 cores (a 2-rank fixture waits for both; a fixture's
        # own shards run side by side): each fixture's share of vmstat's samples is its own.
        cpu = vmstat_means(samples, t, t + f["seconds"])
        t += f["seconds"]
        bare = bare_launch(a.mpiexec, exe, f["fixture"], f["np"])
        cells = [f"{x:.0f}" for x in cpu] if cpu else ["-"] * 3
        print(f"| {f['fixture']} | {f['np']} | {f['seconds']:.1f} | {bare:.1f} | {run_s:.1f} | "
              f"{f['seconds'] - bare - run_s:.1f} | " + " | ".join(cells) + " |")
    print()
    print(f"scenario run time {total_scen_s:.1f} s on the first rank, of it the planted-defect arms "
          f"{defect_s:.1f} s ({100 * defect_s / max(total_scen_s, 1e-9):.0f} %)")
    print()
    print("| fixture | suite | tests s |")
    print("|---|---|---|")
    for (fx, s), sec in sorted(suites.items(), key=lambda kv: -kv[1])[:25]:
        print(f"| {fx} | {s} | {sec:.1f} |")
    print()
    print("| fixture | scenario | runs | run s |")
    print("|---|---|---|---|")
    for (fx, s), (n, sec) in sorted(scen.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"| {fx} | {s or '(unnamed)'} | {n} | {sec:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

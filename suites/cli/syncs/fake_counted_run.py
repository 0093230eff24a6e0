#!/usr/bin/env python3
"""A stand-in for a CUDA program under `loopgate syncs --overhead-ab`: it writes the table the injection library
would, with 40 alternating iterations whose counted ones take PCT percent longer (argv[1]), so the CPU tests pin
the overhead verdict. Refuses (exit 3) when the counter's environment does not ask for the A/B."""
import json, os, sys

if os.environ.get("LOOPGATE_CUPTI_AB") != "1":
    sys.exit("fake_counted_run: LOOPGATE_CUPTI_AB is not 1")
pct = float(sys.argv[1])
uncounted = [100.0 + 0.25 * (i % 5) for i in range(20)]
counted = [(100.0 + 0.25 * ((i + 2) % 5)) * (1 + pct / 100) for i in range(20)]
table = {"format": "loopgate-syncs/1", "pid": os.getpid(), "region": "marked iterations 1-40", "iterations_seen": 20,
         "iterations": [1], "python": "read",
         "sites": [{"site": "train.py:10 step", "kind": ".item() (scalar D2H + stream sync)", "per_iteration": {"1": 1}}],
         "overhead_ab": {"counted_ms": counted, "uncounted_ms": uncounted}}
with open(os.environ["LOOPGATE_CUPTI_JSON"].replace("%p", str(os.getpid())), "w") as f:
    json.dump(table, f)

#!/usr/bin/env python3
"""A stand-in for a CUDA program under `loopgate syncs --overhead-ab`: it writes the table the injection library
would, with 41 alternating iterations (counted first) on a drifting host (+0.5 ms an iteration, a small repeating
jitter), the counted ones PCT percent longer (argv[1]), so the CPU tests pin the overhead verdict; with argv[2]
"stall", counted iteration 20 also takes 300 ms more (a host stall, which must not decide the verdict). Refuses
(exit 3) when the counter's environment does not ask for the A/B."""
import json, os, sys

if os.environ.get("LOOPGATE_CUPTI_AB") != "1":
    sys.exit("fake_counted_run: LOOPGATE_CUPTI_AB is not 1")
pct = float(sys.argv[1])
ms, counted = [], []
for i in range(41):
    t = 100.0 + 0.5 * i + 0.25 * (i % 3)
    ms.append(t * (1 + pct / 100) if i % 2 == 0 else t)
    counted.append(i % 2 == 0)
if sys.argv[2:] == ["stall"]:
    ms[20] += 300.0
table = {"format": "loopgate-syncs/1", "pid": os.getpid(), "region": "marked iterations 1-41", "iterations_seen": 21,
         "iterations": [1], "python": "read",
         "sites": [{"site": "train.py:10 step", "kind": ".item() (scalar D2H + stream sync)", "per_iteration": {"1": 1}}],
         "overhead_ab": {"counted_ms": [m for m, c in zip(ms, counted) if c],
                         "uncounted_ms": [m for m, c in zip(ms, counted) if not c],
                         "iteration_ms": ms, "iteration_counted": counted}}
with open(os.environ["LOOPGATE_CUPTI_JSON"].replace("%p", str(os.getpid())), "w") as f:
    json.dump(table, f)

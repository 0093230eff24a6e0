"""A multi-threaded PyTorch program for the sync counter on a GPU: under
    loopgate syncs --iter-fn gpu_threads_work:step --json OUT.json -- python3 suites/pystack/gpu_threads.py
every sync must be named at its line in gpu_threads_work.py, from whichever thread made it; then
    python3 suites/pystack/gpu_threads.py --check OUT.json
checks the table: per iteration, THREADS syncs at each reader line and one at the synchronize."""
import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
THREADS, ITERS = 4, 8


def expected_sites():
    lines = open(os.path.join(HERE, "gpu_threads_work.py")).read().splitlines()
    out = {}
    for i, line in enumerate(lines, 1):
        if "# SYNC " in line:
            fn = "step.<locals>.reader" if "reader" in "".join(lines[max(0, i - 4):i]) and "synchronize" not in line else "step"
            out[f":{i} {fn}"] = 1 if "synchronize" in line else THREADS
    return out


def run():
    import torch
    import gpu_threads_work

    x = torch.randn(1 << 20, device="cuda")

    def threads(fn):
        ts = [threading.Thread(target=fn, args=(k,)) for k in range(THREADS)]
        for t in ts:
            t.start()
        return ts

    for _ in range(ITERS):
        gpu_threads_work.step(x, threads)
    print("gpu_threads: ran", ITERS, "iterations")


def check(path):
    table = json.load(open(path))
    want = expected_sites()
    got = {}
    for p in table["processes"]:
        for s in p["sites"]:
            n_it = len([it for it in s["per_iteration"] if int(it) >= 1])
            key = s["site"][s["site"].find(":"):] if "gpu_threads_work.py" in s["site"] else s["site"]
            got.setdefault(key, []).append((s["kind"], s["per_iteration"]))
    failures = []
    for key, per_iter in want.items():
        if key not in got:
            failures.append(f"site gpu_threads_work.py{key} not in the table")
            continue
        for it in range(1, ITERS + 1):
            n = sum(pi.get(str(it), 0) for _, pi in got[key])
            if n < per_iter:
                failures.append(f"gpu_threads_work.py{key}: iteration {it}: {n} syncs, want >= {per_iter}")
    for f in failures:
        print("FAILED:", f)
    print(f"gpu_threads check: {len(want)} sites x {ITERS} iterations, {len(failures)} failed; table sites: "
          + "; ".join(f"{k} {v[0][0]}" for k, v in sorted(got.items())))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(check(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--check" else run())

#!/usr/bin/env python3
"""Checks loopgate_bench's Google Benchmark JSON (bench_smoke; docs/bench.md).

  check_bench_json.py FILE [--arms baseline,syncfree,onesync,zerosync]
      exit 0 when: every arm has its step/<fixture>/<config>/<arm> entries (one per repetition) and no error; each
      entry carries syncs/iter and launches/iter (numbers, launches > 0) and a positive time; idle_pct, when
      present, lies in [0, 100]; per fixture and config the baseline reads more per iteration than zerosync; the
      bookkeeping/* microbenchmarks ran, and the ledger switched off costs less than counting.
      Exit 1 with one line per problem otherwise.
  check_bench_json.py --planted FILE
      the check must reject each planted defect of FILE (a counter left out, an arm missing, zerosync reading as
      much as the baseline, an errored run, a bookkeeping benchmark missing or the ledger off costing as much); FILE itself must pass. Exit 0 when all of that holds.
"""
import copy
import json
import math
import sys

COUNTERS = ("syncs/iter", "launches/iter")


def name_parts(b):
    """The registered name's parts: Google Benchmark appends /iterations:N, /repeats:N, /manual_time and the like."""
    parts = b.get("run_name", b.get("name", "")).split("/")
    return [p for p in parts if ":" not in p and p not in ("manual_time", "real_time", "process_time")]


def step_entries(doc):
    """(fixture, config, arm) -> iteration entries of the step benchmarks (aggregates left out)."""
    out = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        parts = name_parts(b)
        if len(parts) != 4 or parts[0] != "step":
            continue
        out.setdefault(tuple(parts[1:]), []).append(b)
    return out


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(doc, arms):
    problems = []
    entries = step_entries(doc)
    cases = sorted({(fx, cfg) for fx, cfg, _ in entries})
    if not cases:
        return ["no step/<fixture>/<config>/<arm> entries"]
    for fx, cfg in cases:
        for arm in arms:
            runs = entries.get((fx, cfg, arm), [])
            want = runs[0].get("repetitions", 1) if runs else 1
            if len(runs) != want:
                problems.append(f"step/{fx}/{cfg}/{arm}: {len(runs)} entries, expected {want} (one per repetition)")
            for b in runs:
                name = b.get("name")
                if b.get("error_occurred"):
                    problems.append(f"{name}: error: {b.get('error_message', '?')}")
                for c in COUNTERS:
                    if not is_number(b.get(c)) or b[c] < 0:
                        problems.append(f"{name}: counter {c} missing or not a number >= 0: {b.get(c)!r}")
                if is_number(b.get("launches/iter")) and b["launches/iter"] <= 0:
                    problems.append(f"{name}: launches/iter is {b['launches/iter']}: nothing was counted")
                if "idle_pct" in b and not (is_number(b["idle_pct"]) and 0 <= b["idle_pct"] <= 100):
                    problems.append(f"{name}: idle_pct {b['idle_pct']!r} outside [0, 100]")
                if not is_number(b.get("real_time")) or b["real_time"] <= 0:
                    problems.append(f"{name}: real_time {b.get('real_time')!r} is not a positive time")
        base = entries.get((fx, cfg, "baseline"), [])
        zero = entries.get((fx, cfg, "zerosync"), [])
        if "baseline" in arms and "zerosync" in arms and base and zero:
            b, z = base[0].get("syncs/iter"), zero[0].get("syncs/iter")
            if is_number(b) and is_number(z) and not b > z:
                problems.append(f"{fx}/{cfg}: baseline syncs/iter {b} is not above zerosync's {z}")
    problems += check_bookkeeping(doc)
    return problems


BOOKKEEPING = ("bookkeeping/ledger_iteration/counting", "bookkeeping/ledger_iteration/off", "bookkeeping/level1_timers")


def check_bookkeeping(doc):
    """The instrumentation-cost microbenchmarks ran, with positive times, and the ledger switched off costs less."""
    found = {"/".join(name_parts(b)): b for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"}
    problems = []
    for name in BOOKKEEPING:
        b = found.get(name)
        if b is None:
            problems.append(f"{name}: missing")
        elif b.get("error_occurred") or not is_number(b.get("real_time")) or b["real_time"] <= 0:
            problems.append(f"{name}: no positive time (error: {b.get('error_message', 'none')})")
    on, off = found.get(BOOKKEEPING[0]), found.get(BOOKKEEPING[1])
    if on and off and is_number(on.get("real_time")) and is_number(off.get("real_time")) and \
            not off["real_time"] < on["real_time"]:
        problems.append(f"the ledger switched off ({off['real_time']} ns) costs no less than counting ({on['real_time']} ns)")
    return problems


def planted_defects(doc):
    """(name, doc with one defect)."""
    def edit(fn):
        d = copy.deepcopy(doc)
        fn(d)
        return d

    def bookkeeping(d, rest):
        return next(b for b in d["benchmarks"] if "/".join(name_parts(b)) == "bookkeeping/" + rest)

    def first(d, arm):
        return next(b for b in d["benchmarks"] if name_parts(b)[-1] == arm)

    return [
        ("launches/iter left out (zerosync)", edit(lambda d: first(d, "zerosync").pop("launches/iter"))),
        ("syncs/iter left out (baseline)", edit(lambda d: first(d, "baseline").pop("syncs/iter"))),
        ("arm missing (onesync)", edit(lambda d: d["benchmarks"].remove(first(d, "onesync")))),
        ("zerosync reads as much as the baseline",
         edit(lambda d: first(d, "zerosync").__setitem__("syncs/iter", first(d, "baseline")["syncs/iter"]))),
        ("nothing launched (syncfree)", edit(lambda d: first(d, "syncfree").__setitem__("launches/iter", 0))),
        ("an errored run (baseline)", edit(lambda d: first(d, "baseline").update(error_occurred=True,
                                                                                   error_message="planted"))),
        ("idle_pct out of range (onesync)", edit(lambda d: first(d, "onesync").__setitem__("idle_pct", 250.0))),
        ("bookkeeping benchmark missing (level1_timers)",
         edit(lambda d: d["benchmarks"].remove(bookkeeping(d, "level1_timers")))),
        ("the ledger off costs as much as counting",
         edit(lambda d: bookkeeping(d, "ledger_iteration/off").__setitem__(
             "real_time", bookkeeping(d, "ledger_iteration/counting")["real_time"]))),
    ]


def main(argv):
    arms = ["baseline", "syncfree", "onesync", "zerosync"]
    args = list(argv[1:])
    planted = "--planted" in args
    if planted:
        args.remove("--planted")
    if "--arms" in args:
        i = args.index("--arms")
        arms = args[i + 1].split(",")
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0]) as f:
        doc = json.load(f)
    if not planted:
        problems = check(doc, arms)
        for p in problems:
            print(f"bench check: FAIL: {p}")
        if not problems:
            print(f"bench check: OK: {', '.join(arms)} with {', '.join(COUNTERS)}; baseline reads more than zerosync")
        return 1 if problems else 0
    ok = True
    clean = check(doc, arms)
    if clean:
        ok = False
        print(f"bench check: the unplanted file fails: {clean[0]}")
    for name, bad in planted_defects(doc):
        problems = check(bad, arms)
        print(f"planted {name}: {'rejected: ' + problems[0] if problems else 'NOT REJECTED'}")
        ok = ok and bool(problems)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

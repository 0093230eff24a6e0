#!/usr/bin/env python3
"""The bad-input rows generated from the CLI's own definitions (CTest cli_bad_input_generated).

`loopgate cli-reference` prints every option of every subcommand with its type and help text. Every INT or FLOAT
option declares its range in that text (">= 1", "> 0", "in (0, 1)", "0-64"), and every enumerated TEXT option its
values ("cpu | cuda"). From that, per option:
  numeric:    below the minimum, at it, above the maximum (when one is declared), a non-number;
  enumerated: every listed value, and one that is not listed.
A refused value must exit 2 with exactly one stderr line "loopgate: error: ..." naming the option and the value as
typed, and nothing on stdout; an accepted one must pass every input check (LOOPGATE_VALIDATE_ONLY=1: the subcommand
checks its arguments and exits 0 before any work). Every row runs with LOOPGATE_VALIDATE_ONLY=1, so a range check
that went missing shows as exit 0 instead of a run. An option whose help declares no range, or a range this reader
cannot parse, fails the test: declare it, or list it in NO_RANGE with the reason.
Cross-option rules stay hand-written in bad_input_table.sh.

  bad_input_generated.py LOOPGATE MPIEXEC SOURCE_DIR
  LOOPGATE_BAD_INPUT_ROWS=REGEX   only the rows whose "SUBCOMMAND OPTION VALUE" matches (while working on one)
The one-rank rows run through `loopgate --each-row` (a forked copy of one loaded process per row: the start-up, not the
checks, was 0.5 s of each row); the rows that need ranks run as their own mpiexec jobs.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

LG, MPIEXEC, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
EX = os.path.join(SRC, "docs/examples/megatron")
WORK = tempfile.mkdtemp(prefix="loopgate-generated-")
GATE_JSON = os.path.join(WORK, "gate.json")
open(GATE_JSON, "w").write("{}\n")

# Arguments that make a subcommand's other input checks pass, so a row tests the one option it varies.
BASE = {
    "run": [],
    "gate": [],
    "golden": ["--check"],
    "ab": ["--arms", "baseline,syncfree"],
    "compare": ["--a", f"{EX}/baseline_run1.log", "--b", f"{EX}/candidate_run1.log"],
    "report": ["--gate", GATE_JSON, "--out", os.path.join(WORK, "r.html")],
    "selftest": [],
    "pair": ["--baseline", "true", "--candidate", "true"],
    "syncs": ["--table", os.path.join(SRC, "suites/cli/syncs/overhead_table.json"), "--overhead-ab"],
}
AB_FILES = [f"{EX}/baseline_run1.log", f"{EX}/candidate_run1.log"]
AB_FILE_MODE = {"--alpha", "--window", "--warmup-windows", "--time-source"}  # ab's options of its file mode

# Accepted values that need company to pass the other checks (cross-option rules: bad_input_table.sh).
CONTEXT = {
    ("run", "--iters", "1"): ["--lr-warmup-iters", "0"],
    ("ab", "--iters", "1"): ["--lr-warmup-iters", "0"],
    ("run", "--lr-decay-iters", "1"): ["--lr-warmup-iters", "0"],
    ("ab", "--lr-decay-iters", "1"): ["--lr-warmup-iters", "0"],
    ("run", "--simulated-minutes-per-iteration", "*"): ["--exit-duration-in-mins", "1"],
    ("ab", "--simulated-minutes-per-iteration", "*"): ["--exit-duration-in-mins", "1"],
    ("run", "--lr-wsd-decay-iters", "*"): ["--lr-decay-style", "WSD"],
    ("ab", "--lr-wsd-decay-iters", "*"): ["--lr-decay-style", "WSD"],
    ("run", "--lr-decay-style", "WSD"): ["--lr-wsd-decay-iters", "2"],
    ("ab", "--lr-decay-style", "WSD"): ["--lr-wsd-decay-iters", "2"],
    ("run", "--permute-seed", "*"): ["--reduce-order", "permuted"],
    ("ab", "--permute-seed", "*"): ["--reduce-order", "permuted"],
    ("run", "--lr", "0"): ["--min-lr", "0"],
    ("ab", "--lr", "0"): ["--min-lr", "0"],
    ("run", "--global-batch-size", "1"): ["--micro-batch-size", "1"],
    ("run", "--hidden-size", "1"): ["--num-attention-heads", "1"],
    ("ab", "--global-batch-size", "1"): ["--micro-batch-size", "1"],
    ("gate", "--iters", "4"): ["--check", "equivalence"],
    ("run", "--stress", "*"): ["--device", "cuda"],  # a GPU's copies; on CPU --async-emulation
    ("run", "--save-interval", "*"): ["--save", os.path.join(WORK, "ck")],  # checked writable, nothing made
}
# Ranks an accepted value needs (the job's size must match the fixture's).
NP = {("run", "--fixture", "tp2sp"): 2, ("run", "--fixture", "pp2"): 2, ("run", "--fixture", "dp64"): 64,
      ("run", "--fixture", "pp2tp2dp2"): 8, ("ab", "--fixture", "tp2sp"): 2, ("ab", "--fixture", "pp2"): 2,
      ("ab", "--fixture", "dp64"): 64, ("ab", "--fixture", "pp2tp2dp2"): 8}
# Values a CPU build refuses by design (the GPU tier is not built in): accepted only with a GPU build.
GPU_ONLY_VALUES = {"cuda"}
# Options whose help declares no range, each with why.
NO_RANGE = {}
# Accepted values left out, each with why (the run they start is the test elsewhere).
SKIP_ACCEPT = {
    ("run", "--fixture", "dp64"): "64 ranks: the gate's dp64 launch covers it",
    ("ab", "--fixture", "dp64"): "64 ranks: the gate's dp64 launch covers it",
}


def parse_reference(text):
    """[(subcommand, [names], type, help)] from cli-reference's Markdown."""
    out, sub = [], None
    for line in text.splitlines():
        m = re.match(r"^### loopgate (\S+)", line)
        if m:
            sub = m.group(1)
            continue
        m = re.match(r"^\| (`--[^|]*`) \| (\w+) \| (.*) \|$", line)
        if m and sub:
            names = re.findall(r"`(--[^`]+)`", m.group(1))
            out.append((sub, names, m.group(2), m.group(3).replace("\\|", "|")))
    return out


NUM = r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)"


def numeric_range(help_text):
    """(lo, lo_inclusive, hi, hi_inclusive) declared in the help, or None."""
    m = re.search(r"in ([(\[])" + NUM + r", " + NUM + r"([)\]])", help_text)
    if m:
        return float(m.group(2)), m.group(1) == "[", float(m.group(3)), m.group(4) == "]"
    m = re.search(r"\b" + NUM + r"\.\." + NUM + r"\b", help_text)
    if m:
        return float(m.group(1)), True, float(m.group(2)), True
    m = re.search(r"(?:^|[ ,(])" + r"(\d+)-(\d+)\b", help_text)
    if m:
        return float(m.group(1)), True, float(m.group(2)), True
    lo = re.search(r"(>=|>) " + NUM, help_text)
    hi = re.search(r"(<=|<) " + NUM, help_text)
    if not lo and not hi:
        return None
    return (float(lo.group(2)) if lo else None, bool(lo) and lo.group(1) == ">=",
            float(hi.group(2)) if hi else None, bool(hi) and hi.group(1) == "<=")


def enum_values(help_text):
    """The listed values of an enumerated TEXT option ("a (default) | b | c ..."), or None."""
    head = re.split(r"[;:]", help_text)[0]
    parts = [p.strip() for p in head.split("|")]
    if len(parts) < 2:
        return None
    values = []
    for p in parts:
        w = p.split(" ")[0]
        if re.fullmatch(r"[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*", w):
            values.append(w)
    return values if len(values) >= 2 else None


def fmt(v, is_int):
    if is_int:
        return str(int(v))
    return ("%g" % v) if v != int(v) else str(int(v)) if abs(v) < 1e15 else "%g" % v


def numeric_rows(sub, name, typ, rng):
    lo, lo_in, hi, hi_in = rng
    is_int = typ == "INT"
    step = 1 if is_int else 0.5
    rows = []  # (label, value, accepted)
    if lo is not None:
        rows.append(("below the minimum", fmt(lo - step if lo_in else lo, is_int), False))
        rows.append(("at the minimum", fmt(lo if lo_in else lo + step, is_int), True))
    if hi is not None:
        rows.append(("above the maximum", fmt(hi + step if hi_in else hi, is_int), False))
        rows.append(("at the maximum", fmt(hi if hi_in else hi - step, is_int), True))
    rows.append(("not a number", "x1", False))
    return rows


def row_args(sub, name, value):
    """The row's arguments after the program, and the ranks it runs on (0: no mpiexec)."""
    args = list(BASE[sub])
    if sub == "ab" and name in AB_FILE_MODE:
        args = list(AB_FILES)
    for key in ((sub, name, value), (sub, name, "*")):
        args += CONTEXT.get(key, [])
    return [sub] + args + [name, value], NP.get((sub, name, value), 0)


def run_mpi_row(args, np):
    """A row that needs ranks, as its own mpiexec job: (exit code, stdout, stderr)."""
    env = dict(os.environ, LOOPGATE_VALIDATE_ONLY="1")
    try:
        p = subprocess.run([MPIEXEC, "-q", "-n", str(np), LG] + args, cwd=WORK, env=env, capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 124, "", ""
    return p.returncode, p.stdout, p.stderr


def run_rows_in_one_process(rows):
    """The one-rank rows through `loopgate --each-row` (one process start for all; tools/loopgate/each_row.h):
    [(exit code, stdout, stderr)], in order."""
    path = os.path.join(WORK, "rows.json")
    with open(path, "w") as f:
        json.dump(rows, f)
    env = dict(os.environ, LOOPGATE_VALIDATE_ONLY="1")
    p = subprocess.run([LG, "--each-row", path], cwd=WORK, env=env, capture_output=True, text=True, check=True)
    codes = [int(m.group(2)) for m in re.finditer(r"^row (\d+) exit (\d+) \d+ ms$", p.stdout, re.M)]
    if len(codes) != len(rows):
        sys.exit(f"loopgate --each-row ran {len(codes)} of {len(rows)} rows: {p.stdout[-300:]}{p.stderr[-300:]}")
    return [(code, open(f"{path}.{i}.out").read(), open(f"{path}.{i}.err").read()) for i, code in enumerate(codes)]


def judge(args, value, name, accepted, code, stdout, stderr):
    """None when the row did what the CLI promises, else why not."""
    if code == 124:
        return "timed out (60 s): did it start work?"
    err = [l for l in stderr.splitlines() if l.strip()]
    if accepted:
        gpu_row = value in GPU_ONLY_VALUES or "cuda" in args
        if gpu_row and code == 2 and "without the GPU tier" in stderr:
            return None
        if code != 0:
            return f"accepted value refused: exit {code}: {stderr.strip()[:200]}"
        return None
    if code != 2:
        return f"refused value: exit {code}, expected 2; stdout {stdout.strip()[:120]!r}"
    if len(err) != 1 or not err[0].startswith("loopgate: error: "):
        return f"refused value: {len(err)} stderr lines, expected one 'loopgate: error: ...': {err[:3]}"
    if stdout.strip():
        return f"refused value printed on stdout: {stdout.strip()[:120]!r}"
    if value not in err[0] or not any(n in err[0] for n in (name,)):
        return f"the one line does not name {name} and {value!r}: {err[0]}"
    return None


def main():
    ref = subprocess.run([LG, "cli-reference"], capture_output=True, text=True, check=True).stdout
    options = parse_reference(ref)
    jobs, undeclared, shared = [], [], 0
    first_definition = {}  # (names, type, help) -> the subcommand that defined it first
    for sub, names, typ, help_text in options:
        name = names[0]
        key = (tuple(names), typ, help_text)
        if key in first_definition:  # the same definition (ab's copy of run's flags): its rows are the first's
            shared += 1
            continue
        first_definition[key] = sub
        cases = []
        if typ in ("INT", "FLOAT"):
            rng = numeric_range(help_text)
            if rng is None:
                if (sub, name) not in NO_RANGE:
                    undeclared.append(f"{sub} {name} ({typ}): its help declares no range: {help_text}")
                continue
            cases = numeric_rows(sub, name, typ, rng)
        elif typ == "TEXT":
            values = enum_values(help_text)
            if values is None:
                continue
            cases = [("listed value", v, True) for v in values] + [("not listed", "nope", False)]
        for label, value, accepted in cases:
            if accepted and (sub, name, value) in SKIP_ACCEPT:
                print(f"skip  {sub} {name} {value}: {SKIP_ACCEPT[(sub, name, value)]}")
                continue
            if re.search(os.environ.get("LOOPGATE_BAD_INPUT_ROWS", ""), f"{sub} {name} {value}"):
                jobs.append((sub, name, value, accepted, label))
    # The one-rank rows in one process start; the few that need ranks as mpiexec jobs.
    built = [row_args(sub, name, value) for sub, name, value, _, _ in jobs]
    single = [i for i, (_, np) in enumerate(built) if not np]
    outcomes = dict(zip(single, run_rows_in_one_process([built[i][0] for i in single])))
    for i, (args, np) in enumerate(built):
        if np:
            outcomes[i] = run_mpi_row(args, np)
    problems = [judge(built[i][0], value, name, accepted, *outcomes[i])
                for i, (sub, name, value, accepted, _) in enumerate(jobs)]
    per_sub, failed = {}, 0
    for (sub, name, value, accepted, label), problem in zip(jobs, problems):
        per_sub[sub] = per_sub.get(sub, 0) + 1
        failed += problem is not None
        print(f"{'ok  ' if problem is None else 'FAIL'}  loopgate {sub} {name} {value}  ({label})"
              f"{'' if problem is None else ': ' + problem}")
    for u in undeclared:
        print(f"FAIL  {u}")
    failed += len(undeclared)
    # The count docs/checks.md quotes is this set's (an option added or removed without the docs fails here).
    checks_md = open(os.path.join(SRC, "docs/checks.md")).read()
    if not os.environ.get("LOOPGATE_BAD_INPUT_ROWS") and f"**{len(jobs)} rows**" not in checks_md:
        print(f"FAIL  docs/checks.md does not quote this set's count: '**{len(jobs)} rows**'")
        failed += 1
    counts = ", ".join(f"{s} {n}" for s, n in per_sub.items())
    print(f"generated bad input: {len(jobs)} rows ({counts}), {failed} failed; {len(options)} options read from "
          f"`loopgate cli-reference`, {shared} of them the same definition as an earlier subcommand's (its rows)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

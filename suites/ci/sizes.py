#!/usr/bin/env python3
"""sizes.py SRC_DIR [--at COMMIT | --doc DOC [--update | --plant]]: the code's sizes as docs/architecture.md prints
them, between its `sizes:begin` and `sizes:end` markers. Without --doc: print the block (--at: of the tracked files at
COMMIT, for a before-and-after figure). With --doc: fail when the doc's block differs (a size changed and the doc was
not regenerated); --update rewrites the block instead (then commit the doc); --plant changes one figure of the code's
block, which must then fail.

Counted over tracked `.h`, `.cpp` and `.cu` files: lines per folder, the largest files, and the largest functions
(a definition starts at column 0 and ends at the first `}` at column 0 after it; lambdas and members defined inside
a class count with their enclosing definition). The loop's seams: `train.cpp`'s lines, `struct Loop`'s data members,
`Mutation`'s and `LoopProtocol`'s virtual methods (destructors left out); the window code, the families, the step
driver and the planted defects' seam files; the tracked bytes under results/."""
import re
import subprocess
import sys
from pathlib import Path

FOLDERS = ["trainer/common", "trainer/parallel", "trainer/model", "trainer/measure", "trainer/capture",
           "trainer/timers", "trainer/optim", "trainer/pipeline", "trainer/loop", "fixtures", "tools", "suites"]


def git(src, *args):
    return subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True, check=True).stdout


def sources(src, at=None):
    out = git(src, "ls-tree", "-r", "--name-only", at) if at else git(src, "ls-files")
    return [f for f in out.split() if re.search(r"\.(h|cpp|cu)$", f)]


def read(src, f, at=None):
    return git(src, "show", f"{at}:{f}") if at else (src / f).read_text(encoding="utf-8")


def functions(text):
    """(name, lines) of each column-0 definition."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^[A-Za-z_][\w:<>,*& ]*?\b([A-Za-z_][\w:~]*)\(", line)
        if m and not line.rstrip().endswith(";") and not re.match(r"^(namespace|struct|class|enum|union|using|#)", line):
            j = i
            while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and "{" in lines[j]:
                k = j
                while k < len(lines) and not (lines[k].startswith("}") or (k == j and lines[k].rstrip().endswith("}"))):
                    k += 1
                found.append((m.group(1), k - i + 1))
                i = k + 1
                continue
        i += 1
    return found


def block_members(text, opener):
    """The lines of the block that `opener` starts, up to its `};`."""
    start = text.index(opener)
    end = text.index("\n};", start)
    return text[start:end].splitlines()[1:]


def loop_members(text):
    count = 0
    for line in block_members(text, "struct Loop {"):
        code = line.split("//")[0].strip()
        if not code.endswith(";") or "(" in code.split("=")[0]:
            continue  # a comment, a constructor, a function
        count += 1
    return count


def virtuals(text, opener):
    return sum(1 for line in block_members(text, opener) if re.match(r"\s*virtual\s", line) and "~" not in line)


def results_bytes(src, at=None):
    """Bytes of the tracked files under results/: at COMMIT from git, else as they are on disk."""
    if at:
        return sum(int(line.split()[3]) for line in git(src, "ls-tree", "-r", "-l", at, "results").splitlines())
    return sum((src / f).stat().st_size for f in git(src, "ls-files", "results").split() if (src / f).exists())


def block(src, at=None):
    files = sources(src, at)
    text = {f: read(src, f, at) for f in files}
    n = {f: len(text[f].splitlines()) for f in files}
    rows = ["| folder | files | lines |", "|---|---|---|"]
    for d in FOLDERS:
        mine = [f for f in files if f.startswith(d + "/")]
        rows.append(f"| `{d}` | {len(mine)} | {sum(n[f] for f in mine)} |")
    biggest = sorted(files, key=lambda f: -n[f])[:6]
    funcs = sorted(((len_, name, f) for f in files if f.endswith(".cpp") for name, len_ in functions(text[f])),
                   reverse=True)[:6]
    loop = "trainer/loop/train.cpp"
    out = ["<!-- sizes:begin (generated: python3 suites/ci/sizes.py . --doc docs/architecture.md --update) -->", ""]
    out += rows + [""]
    out.append("The largest files: " + ", ".join(f"`{f}` {n[f]}" for f in biggest) + ".")
    out.append("")
    out.append("The largest functions: " + ", ".join(f"`{name}` ({f}) {len_}" for len_, name, f in funcs) + ".")
    out.append("")
    out.append(f"The loop's seams: `{loop}` {n[loop]} lines; `Loop` {loop_members(text[loop])} data members; "
               f"`Mutation` {virtuals(text['trainer/loop/mutation.h'], 'class Mutation {')} virtual points; "
               f"`LoopProtocol` {virtuals(text['trainer/loop/protocol.h'], 'class LoopProtocol {')} virtual methods.")
    window = [f for f in files if re.match(r"trainer/loop/(log_window|log_point|run_result)\.(h|cpp)$", f)]
    counters = sum(len(re.findall(r"int64_t advanced_?\b", text[f])) for f in files if f.startswith("trainer/loop/"))
    families = [f for f in files if re.match(r"trainer/loop/protocol_\w+\.cpp$", f)]
    mutations = [f for f in files if re.match(r"fixtures/defects/mutations(_\w+)?\.cpp$", f)]
    driver = "trainer/loop/step_driver.h"
    out.append("")
    out.append(f"The window code (`log_window`, `log_point`, `run_result`, .h and .cpp): {sum(n[f] for f in window)} "
               f"lines in {len(window)} files; the three families (`protocol_*.cpp`) {sum(n[f] for f in families)} lines; "
               f"{counters} declaration(s) of the window's counters in `trainer/loop`. "
               f"`{driver}`: `StepDriver` {virtuals(text[driver], 'class StepDriver {')} virtual methods, "
               f"{text[driver].count('std::function<')} `std::function` types. "
               f"`fixtures/defects/mutations*.cpp`: {sum(n[f] for f in mutations)} lines in {len(mutations)} files.")
    out.append("")
    out.append(f"Tracked `results/` (the raw logs the docs cite): {results_bytes(src, at) / 1e6:.2f} MB.")
    out += ["", "<!-- sizes:end -->"]
    return "\n".join(out)


def main():
    src = Path(sys.argv[1]).resolve()
    now = block(src, sys.argv[sys.argv.index("--at") + 1] if "--at" in sys.argv else None)
    if "--plant" in sys.argv:  # the check's own power: a size the doc does not hold must fail it
        now = now.replace(" lines; `Loop`", "1 lines; `Loop`")
    if "--doc" not in sys.argv:
        print(now)
        return 0
    name = sys.argv[sys.argv.index("--doc") + 1]
    doc = src / name
    text = doc.read_text(encoding="utf-8")
    m = re.search(r"<!-- sizes:begin.*?<!-- sizes:end -->", text, re.S)
    if not m:
        print(f"FAIL {name}: no sizes:begin / sizes:end block")
        return 1
    if "--update" in sys.argv:
        doc.write_text(text[:m.start()] + now + text[m.end():], encoding="utf-8")
        print(f"sizes: {name} updated")
        return 0
    if m.group(0) != now:
        print(f"FAIL {name}'s sizes block is not the code's; regenerate it with:")
        print(f"  python3 suites/ci/sizes.py . --doc {name} --update")
        for a, b in zip(m.group(0).splitlines(), now.splitlines()):
            if a != b:
                print(f"  doc:  {a}\n  code: {b}")
                break
        return 1
    print(f"ok: {name}'s sizes block is the code's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""sizes.py SRC_DIR [--doc DOC [--update | --plant]]: the code's sizes as docs/architecture.md prints them, between its
`sizes:begin` and `sizes:end` markers. Without --doc: print the block. With --doc: fail when the doc's block differs
(a size changed and the doc was not regenerated); --update rewrites the block instead (then commit the doc);
--plant changes one figure of the code's block, which must then fail.

Counted over tracked `.h`, `.cpp` and `.cu` files: lines per folder, the largest files, and the largest functions
(a definition starts at column 0 and ends at the first `}` at column 0 after it; lambdas and members defined inside
a class count with their enclosing definition). The loop's seams: `train.cpp`'s lines, `struct Loop`'s data members,
`Mutation`'s and `LoopProtocol`'s virtual methods (destructors left out)."""
import re
import subprocess
import sys
from pathlib import Path

FOLDERS = ["trainer/common", "trainer/parallel", "trainer/model", "trainer/measure", "trainer/capture",
           "trainer/timers", "trainer/optim", "trainer/pipeline", "trainer/loop", "fixtures", "tools", "suites"]


def sources(src):
    out = subprocess.run(["git", "-C", str(src), "ls-files"], capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if re.search(r"\.(h|cpp|cu)$", f)]


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


def block(src):
    files = sources(src)
    text = {f: (src / f).read_text(encoding="utf-8") for f in files}
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
    out += ["", "<!-- sizes:end -->"]
    return "\n".join(out)


def main():
    src = Path(sys.argv[1]).resolve()
    now = block(src)
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

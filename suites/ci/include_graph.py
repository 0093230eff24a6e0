#!/usr/bin/env python3
"""The include graph of the repository's C++ (CTest include_graph): no cycles, no arrow up the layers.

A unit is a header and its .cpp (trainer/loop/sites.h + sites.cpp); an arrow A -> B means a file of A includes a
header of B. Checked:
  1. no cycle between units (two files that need each other);
  2. no cycle between folders;
  3. the trainer's layers, each folder only below itself:
       common < parallel < model, measure, capture < timers < optim < pipeline < loop
     (model, measure and capture side by side: none includes another);
  4. the top folders in order: trainer < fixtures < tools < suites (the system under test knows nothing of the
     harness, the harness nothing of the CLI, nothing of the tests).
Prints the graph's size and every violation with the including file and line.

  include_graph.py SOURCE_DIR
  include_graph.py SOURCE_DIR --plant A B   # also pretend A includes B (the check's own power: must fail)
"""
import collections
import os
import re
import sys

ROOT = sys.argv[1]
PLANT = sys.argv[3:5] if len(sys.argv) >= 5 and sys.argv[2] == "--plant" else None
TOP = ["trainer", "fixtures", "tools", "suites"]
TRAINER_RANK = {"common": 0, "parallel": 1, "model": 2, "measure": 2, "capture": 2, "timers": 3, "optim": 4,
                "pipeline": 5, "loop": 6}


def sources():
    for top in TOP:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in sorted(names):
                if n.endswith((".h", ".cpp", ".cu")):
                    yield os.path.relpath(os.path.join(dirpath, n), ROOT)


def unit(path):
    return os.path.splitext(path)[0]


def folder(u):
    return os.path.dirname(u)


def main():
    edges = collections.defaultdict(dict)  # unit -> {unit: "file:line"}
    files = 0
    for path in sources():
        files += 1
        with open(os.path.join(ROOT, path), errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and os.path.exists(os.path.join(ROOT, m.group(1))) and unit(m.group(1)) != unit(path):
                    edges[unit(path)].setdefault(unit(m.group(1)), f"{path}:{lineno}")
    if PLANT:
        edges[unit(PLANT[0])].setdefault(unit(PLANT[1]), f"{PLANT[0]}:(planted)")
    problems = []

    def cycles(graph):
        index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
        sys.setrecursionlimit(100000)

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in graph.get(v, {}):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
        for v in list(graph):
            if v not in index:
                visit(v)
        return out

    for comp in cycles(edges):
        where = [edges[a][b] for a in comp for b in comp if b in edges.get(a, {})]
        problems.append(f"units that include each other: {', '.join(comp)} ({'; '.join(where)})")
    folders = collections.defaultdict(dict)
    for a, bs in edges.items():
        for b, where in bs.items():
            if folder(a) != folder(b):
                folders[folder(a)].setdefault(folder(b), where)
    for comp in cycles(folders):
        where = [folders[a][b] for a in comp for b in comp if b in folders.get(a, {})]
        problems.append(f"folders that include each other: {', '.join(comp)} ({'; '.join(where)})")
    for a, bs in folders.items():
        for b, where in bs.items():
            ta, tb = a.split("/")[0], b.split("/")[0]
            if TOP.index(tb) > TOP.index(ta):
                problems.append(f"{a} includes {b}, a folder above it ({where})")
            if ta == tb == "trainer":
                la, lb = a.split("/")[1], b.split("/")[1]
                if la not in TRAINER_RANK or lb not in TRAINER_RANK:
                    problems.append(f"{a} or {b}: a trainer folder with no layer (add it to TRAINER_RANK)")
                elif TRAINER_RANK[lb] >= TRAINER_RANK[la]:
                    problems.append(f"{a} includes {b}, not a layer below it ({where})")
    arrows = sum(len(v) for v in edges.values())
    print(f"include graph: {files} files, {len(set(edges) | {b for v in edges.values() for b in v})} units, "
          f"{arrows} arrows between units, {sum(len(v) for v in folders.values())} between folders")
    for p in problems:
        print(f"FAIL {p}")
    print("include graph:", "FAILED" if problems else "no cycle between units or folders, no arrow up the layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

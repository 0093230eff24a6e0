#!/usr/bin/env python3
"""docs_links_test.py SRC_DIR: the product docs hold together. Every relative link of a tracked Markdown file
outside the results archive (results/) names a tracked file or folder, and no doc prints a machine's absolute path
(a home, the work tree, a scratch clone) as if it were the reader's. Also run on planted lines, which must fail."""
import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"\]\(([^)\s]+)\)")
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|Users)/[\w.-]+")


def problems(path, text, tracked, name=None):
    out = []
    name = name or str(path)
    for n, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            rel = (path.parent / target.split("#")[0]).resolve()
            if not any(t == rel or rel in t.parents for t in tracked):
                out.append(f"{name}:{n}: link to {target}: no such tracked file")
        m = MACHINE_PATH.search(line)
        if m:
            out.append(f"{name}:{n}: machine path {m.group(0)}")
    return out


def main():
    src = Path(sys.argv[1]).resolve()
    files = subprocess.run(["git", "-C", str(src), "ls-files"], capture_output=True, text=True, check=True).stdout
    tracked = {(src / f).resolve() for f in files.split()}
    # The check's own power: a dead link and a machine path on planted lines must both be reported.
    planted = problems(src / "docs" / "planted.md", "see [x](no-such-file.md)\n    /work/me/loopgate/build\n", tracked)
    if len(planted) != 2:
        print(f"FAIL the check does not find planted faults: {planted}")
        return 1
    found = []
    for f in sorted(files.split()):
        if f.endswith(".md") and not f.startswith("results/"):
            found += problems(src / f, (src / f).read_text(encoding="utf-8"), tracked, f)
    if found:
        print("FAIL docs with dead links or machine paths:")
        print("\n".join(found[:40]))
        return 1
    n = sum(1 for f in files.split() if f.endswith(".md") and not f.startswith("results/"))
    print(f"ok: {n} Markdown files: every relative link resolves, no machine path")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""results_cited.py SRC_DIR: results/ holds only the evidence the current pages and code cite. A tracked file under
results/ must be named by a tracked file outside results/ (a page, a comment, a script): by its path, by a glob
(`*`, `{a,b}`) that matches it, or by a folder at least two below results/ (results/gpu-logs/NAME/). A citation
of results/ or results/gpu-logs/ alone names no file: it is an index link. results/README.md is the archive's own
index. Superseded logs are read from git history. Also run on a planted uncited file, which must be reported.
--list prints the uncited files (for git rm) and exits 0."""
import fnmatch
import re
import subprocess
import sys
from pathlib import Path

CITATION = re.compile(r"results/[A-Za-z0-9_.*{},/-]+")


def expand(token):
    """Brace alternatives expanded: results/a_{x,y}.log -> results/a_x.log, results/a_y.log."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [out for alt in m.group(1).split(",")
            for out in expand(token[:m.start()] + alt + token[m.end():])]


def citations(texts):
    out = set()
    for text in texts:
        for token in CITATION.findall(text):
            for t in expand(token.rstrip(".,;:")):
                out.add(t)
    return out


def cited(path, cites):
    for c in cites:
        if c.endswith("/"):
            if c.count("/") >= 3 and path.startswith(c):  # results/gpu-logs/X/: its files
                return True
        elif "*" in c:
            if fnmatch.fnmatchcase(path, c):
                return True
        elif path == c:
            return True
    return False


def uncited(results_files, cites):
    return [f for f in results_files if f != "results/README.md" and not cited(f, cites)]


def main():
    src = Path(sys.argv[1]).resolve()
    files = subprocess.run(["git", "-C", str(src), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    texts = []
    for f in files:
        if f.startswith("results/"):
            continue
        try:
            texts.append((src / f).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary or removed from the work tree
    cites = citations(texts)
    results_files = [f for f in files if f.startswith("results/")]
    # The check's own power: an uncited file, one under a folder cited only as an index, and one a brace glob
    # leaves out are reported; a cited path, glob and folder are not.
    planted_cites = citations(["`results/gpu-logs/` and `results/gpu-logs/s9/a_{x,y}.log`, results/gpu-logs/s8/."])
    planted = uncited(["results/gpu-logs/s9/a_x.log", "results/gpu-logs/s9/a_z.log", "results/gpu-logs/s8/b.log",
                       "results/gpu-logs/c.log"], planted_cites)
    if planted != ["results/gpu-logs/s9/a_z.log", "results/gpu-logs/c.log"]:
        print(f"FAIL the check does not find the planted uncited files: {planted}")
        return 1
    missing = uncited(results_files, cites)
    if "--list" in sys.argv[2:]:
        print("\n".join(missing))
        return 0
    if missing:
        print(f"FAIL {len(missing)} file(s) under results/ that no page, comment or script cites "
              "(cite each where it is evidence, or remove it: git history keeps it):")
        print("\n".join(missing[:40]))
        return 1
    print(f"ok: {len(results_files)} files under results/, each cited outside results/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

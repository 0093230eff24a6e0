#!/usr/bin/env bash
# self_contained_test.sh SRC_DIR: the repository stands alone. No tracked file may cite a document that is not in
# it (the design and reference notes the project was started from, kept outside the repository); the facts the
# code relies on live in docs/design.md. Also run with a planted citation, which must be found.
set -u
SRC=$1
cd "$SRC" || exit 1
# The outside notes' names, assembled so that this file itself names none of them.
ext='\.md'
pattern="(DESIGN|STYLE|megatron-semantics|multirank-harness|sync-free-loop|cpu-build-and-run)${ext}|\.\./shared/"
scan() { git ls-files -z 2>/dev/null | xargs -0 grep -nE "$pattern" -- 2>/dev/null | grep -v '^suites/ci/self_contained_test.sh:'; }
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "FAIL $SRC is not a git checkout: nothing to scan"
  exit 1
fi
hits=$(scan)
# The scan's own power: a planted citation in a throw-away tracked-looking file must be reported.
planted=$(printf '// see %s.md "Determinism"\n' DESIGN | grep -nE "$pattern")
if [ -z "$planted" ]; then
  echo "FAIL the pattern does not find a planted citation"
  exit 1
fi
if [ -n "$hits" ]; then
  echo "FAIL files cite documents outside the repository (cite docs/design.md instead):"
  echo "$hits" | head -20
  exit 1
fi
echo "ok: $(git ls-files | wc -l) tracked files cite no document outside the repository"

#!/usr/bin/env bash
# CTest report_browser: renders the report_e2e page in headless Chromium and checks that it loads with no console
# message (the page has no script, and Chromium's log does not tell console levels apart, so any message is an
# error) and that its SVGs are in the rendered DOM (as many <svg> elements as the file holds, at least one). Then
# it proves the check has power: a copy with a script error and a copy without SVGs must both be rejected.
# Skipped (exit 77) only when chromium is not installed; ci/deps-cpu.sh installs it.
# Usage: report_browser.sh REPORT_HTML
set -uo pipefail
html=$1
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "report_browser: SKIPPED: chromium is not installed (ci/deps-cpu.sh installs Debian's chromium package)"
  exit 77
fi
[ -s "$html" ] || { echo "report_browser: FAIL: no report at $html (run the report_e2e test first)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# render FILE: 0 when the page loads with no console message and its SVGs are in the rendered DOM.
render() {
  local file=$1 name=$2 want got
  # Without the background-networking flags Chromium's own connections are refused on a closed network.
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$work/profile-$name" \
    --enable-logging=stderr --v=0 --dump-dom "file://$file" > "$work/$name.dom" 2> "$work/$name.log"
  local rc=$?
  if [ "$rc" -ne 0 ]; then echo "  $name: chromium exited $rc"; tail -n 5 "$work/$name.log"; return 1; fi
  if grep -E ':CONSOLE[:(]' "$work/$name.log"; then echo "  $name: console message(s) above"; return 1; fi
  want=$(grep -o '<svg' "$file" | wc -l)
  got=$(grep -o '<svg' "$work/$name.dom" | wc -l)
  if [ "$want" -lt 1 ] || [ "$got" -ne "$want" ]; then
    echo "  $name: $got <svg> in the rendered DOM, $want in the file (need at least 1, all rendered)"; return 1
  fi
  echo "  $name: loaded, no console message, $got SVGs in the DOM"
}

SECONDS=0
echo "report_browser: $("$chromium" --version 2>/dev/null | head -n 1), $html"
render "$(readlink -f "$html")" report || { echo "report_browser: FAIL: the report does not render cleanly"; exit 1; }

# The check's power: planted defects that must be rejected.
sed 's|</body>|<script>undefined_function_planted_by_report_browser();</script></body>|' "$html" > "$work/js-error.html"
sed '/<svg /,/<\/svg>/d' "$html" > "$work/no-svg.html"
for planted in js-error no-svg; do
  if render "$work/$planted.html" "$planted" > "$work/$planted.out"; then
    cat "$work/$planted.out"; echo "report_browser: FAIL: the planted defect '$planted' was not rejected"; exit 1
  fi
  echo "  planted $planted: rejected ($(tail -n 1 "$work/$planted.out" | sed 's/^ *//'))"
done
echo "report_browser: OK in ${SECONDS} s"

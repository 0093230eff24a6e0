#!/usr/bin/env python3
"""Turn `loopgate ab` logs of a sweep (ci/gpu-sweep.sh) into a markdown table and an SVG plot: the ratio of
medians B/A with its interval against the device work per step (busy ms/iteration of arm A, from `--profile`).

    python3 tools/sweep_plot.py results/gpu-logs/sweep_session5/ab_*.log --svg docs/sweep.svg > table.md

The interval drawn is the Hodges-Lehmann shift's interval divided by A's median (1 + CI/median_A): an
approximation of the ratio's interval, labelled as such. An unprofiled run takes the device work of the profiled
runs of the same fixture and size (their median; marked * in the table, drawn smaller): device work depends on the
model, not on the run. A run whose bit identity failed is drawn hollow and
marked "void" in the table. Standard library only."""
import argparse
import re
import sys

NUM = r"([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)"


def parse(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    m = re.search(r"ab_(\w+?)_(\d+x\d+x\d+)_li(\d+)", path)
    row = {"file": path, "fixture": m.group(1) if m else "?", "size": m.group(2) if m else "?",
           "li": int(m.group(3)) if m else 0}
    a = re.search(r"^A\s+\d+\s+phases of \d+ it\.\s+\d+\s+\d+\s+(\d+)\s+" + NUM, text, re.M)
    b = re.search(r"^B\s+\d+\s+phases of \d+ it\.\s+\d+\s+\d+\s+(\d+)\s+" + NUM, text, re.M)
    mw = re.search(r"two-sided p = " + NUM + r".*?Hodges-Lehmann shift B - A = " + NUM + r" ms/iter, CI \[" + NUM +
                   ", " + NUM + r"\].*?median ratio B/A = " + NUM, text)
    if not (a and b and mw):
        return None
    row.update(n=int(a.group(1)), med_a=float(a.group(2)), med_b=float(b.group(2)), p=float(mw.group(1)),
               shift=float(mw.group(2)), lo=float(mw.group(3)), hi=float(mw.group(4)), ratio=float(mw.group(5)))
    row["identical"] = "bit identity: the alternating run logged the same values" in text
    busy = re.search(r"^A\s+\S+\s+\d+\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM, text,
                     re.M)
    row["busy_a"] = float(busy.group(3)) if busy else None
    # "A - B: step time S ms/iteration, launch-starved L, sync-starved Y, idle I" (before launch-starved existed:
    # "... S ms/iteration, sync-starved Y ms/iteration, idle I ...").
    delta = re.search(r"A - B: step time " + NUM + r" ms/iteration, (?:launch-starved " + NUM + r", )?sync-starved " +
                      NUM + r"(?: ms/iteration)?, idle " + NUM, text)
    row["d_step"], row["d_launch"], row["d_starved"], row["d_idle"] = (
        (float(delta.group(1)), float(delta.group(2)) if delta.group(2) else None, float(delta.group(3)),
         float(delta.group(4))) if delta else (None, None, None, None))
    return row


def borrow_busy(rows):
    """Unprofiled rows take the median busy of the profiled rows with the same fixture and size."""
    by_model = {}
    for r in rows:
        if r["busy_a"] is not None:
            by_model.setdefault((r["fixture"], r["size"]), []).append(r["busy_a"])
    for r in rows:
        r["borrowed"] = False
        known = sorted(by_model.get((r["fixture"], r["size"]), []))
        if r["busy_a"] is None and known:
            n = len(known)
            r["busy_a"] = known[n // 2] if n % 2 else (known[n // 2 - 1] + known[n // 2]) / 2
            r["borrowed"] = True


def table(rows):
    out = ["| fixture | model h×L×s | log interval | samples | median A ms/it | median B ms/it | ratio B/A | HL shift "
           "[95 % CI] ms/it | p (exact) | A busy ms/it | Δstep / Δlaunch-starved / Δsync-starved / Δidle ms/it | bits |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        busy = f"{r['busy_a']:.1f}{'*' if r['borrowed'] else ''}" if r["busy_a"] is not None else "—"
        launch = f"{r['d_launch']:.1f}" if r["d_launch"] is not None else "—"
        d = (f"{r['d_step']:.1f} / {launch} / {r['d_starved']:.1f} / {r['d_idle']:.1f}" if r["d_step"] is not None
             else "—")
        out.append(f"| {r['fixture']} | {r['size']} | {r['li']} | {r['n']} v {r['n']} | {r['med_a']:.1f} | "
                   f"{r['med_b']:.1f} | {r['ratio']:.3f} | {r['shift']:.1f} [{r['lo']:.1f}, {r['hi']:.1f}] | "
                   f"{r['p']:.4g} | {busy} | {d} | {'identical' if r['identical'] else 'DIFFER: void'} |")
    return "\n".join(out)


def svg(rows, title):
    pts = [r for r in rows if r["busy_a"] is not None]
    W, H, L, R, T, B = 640, 360, 60, 20, 30, 50
    xmax = max([r["busy_a"] for r in pts] + [1.0]) * 1.1
    ylo, yhi = 0.6, 1.2
    X = lambda v: L + (W - L - R) * v / xmax
    Y = lambda v: T + (H - T - B) * (yhi - v) / (yhi - ylo)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<text x="{W/2}" y="18" text-anchor="middle" font-size="13">{title}</text>',
         f'<line x1="{L}" y1="{Y(1)}" x2="{W-R}" y2="{Y(1)}" stroke="#999" stroke-dasharray="4 3"/>',
         f'<line x1="{L}" y1="{Y(0.9)}" x2="{W-R}" y2="{Y(0.9)}" stroke="#c66" stroke-dasharray="2 3"/>',
         f'<text x="{W-R}" y="{Y(0.9)-3}" text-anchor="end" fill="#c66">target 0.90</text>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="#000"/>',
         f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="#000"/>',
         f'<text x="{(L+W-R)/2}" y="{H-12}" text-anchor="middle">device busy per step, arm A (ms/iteration, CUPTI)</text>',
         f'<text x="14" y="{(T+H-B)/2}" transform="rotate(-90 14 {(T+H-B)/2})" text-anchor="middle">ratio B/A '
         '(interval: 1 + HL CI / median A)</text>']
    for v in (0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2):
        s.append(f'<text x="{L-6}" y="{Y(v)+4}" text-anchor="end">{v:.1f}</text>')
    step = 20 if xmax > 80 else 10
    for v in range(0, int(xmax) + 1, step):
        s.append(f'<text x="{X(v)}" y="{H-B+14}" text-anchor="middle">{v}</text>')
    colors = {1: "#1f77b4", 20: "#ff7f0e"}
    for r in pts:
        c = colors.get(r["li"], "#2ca02c")
        lo, hi = 1 + r["lo"] / r["med_a"], 1 + r["hi"] / r["med_a"]
        x = X(r["busy_a"]) + (3 if r["li"] == 20 else -3)
        s.append(f'<line x1="{x}" y1="{Y(max(min(lo, yhi), ylo))}" x2="{x}" y2="{Y(max(min(hi, yhi), ylo))}" '
                 f'stroke="{c}"/>')
        fill = c if r["identical"] else "white"
        marker = "circle" if r["fixture"] == "single" else "rect"
        size = 2.5 if r["borrowed"] else 4
        if marker == "circle":
            s.append(f'<circle cx="{x}" cy="{Y(r["ratio"])}" r="{size}" fill="{fill}" stroke="{c}"/>')
        else:
            s.append(f'<rect x="{x-size}" y="{Y(r["ratio"])-size}" width="{2*size}" height="{2*size}" fill="{fill}" '
                     f'stroke="{c}"/>')
    s.append(f'<text x="{L+8}" y="{T+14}" fill="{colors[1]}">● log interval 1</text>')
    s.append(f'<text x="{L+8}" y="{T+28}" fill="{colors[20]}">● log interval 20</text>')
    s.append(f'<text x="{L+8}" y="{T+42}">circle: single (1 GPU); square: tp2sp (2 GPUs); hollow: bits differ, void</text>')
    s.append(f'<text x="{L+8}" y="{T+56}">small: unprofiled run, device work of its model\'s profiled runs</text>')
    s.append("</svg>")
    return "\n".join(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--svg")
    ap.add_argument("--title", default="loopgate ab: onesync / baseline on H200 vs device work per step")
    args = ap.parse_args()
    rows = [r for r in (parse(p) for p in args.logs) if r]
    borrow_busy(rows)
    skipped = len(args.logs) - len(rows)
    rows.sort(key=lambda r: (r["fixture"], r["busy_a"] or 0, r["li"]))
    print(table(rows))
    if skipped:
        print(f"\n({skipped} log(s) without a complete ab report left out)", file=sys.stderr)
    if args.svg:
        open(args.svg, "w").write(svg(rows, args.title))
    return 0 if rows else 2


if __name__ == "__main__":
    sys.exit(main())

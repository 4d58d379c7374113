#!/usr/bin/python3
"""A report field against a swept key, from `pipesim sweep --csv F` or `--json F`.

usage: plots/sweep.py sweep.csv out.png [--x KEY] [--y FIELD] [--logx] [--logy]

--x is a swept key (default: the first), --y any report field of the sweep (default
throughput_samples_per_s; also makespan_s, iteration_time_s, peak_memory_bytes,
bubble_fraction, mfu, ...). Every combination of the other swept keys is one line. Points
that failed are left out and counted under the figure; out-of-memory points are crosses.
"""
import argparse
import csv
import json
from collections import OrderedDict

from plotting import GIB, WIDTH_IN, legend_above, note, pyplot, save

plt = pyplot()

FIELDS = ["makespan_s", "iteration_time_s", "throughput_samples_per_s", "peak_memory_bytes",
          "oom", "bubble_fraction", "mfu", "error"]
LABELS = {"throughput_samples_per_s": "throughput (samples/s)", "makespan_s": "makespan (s)",
          "iteration_time_s": "iteration time (s)", "peak_memory_bytes": "peak memory (GiB)",
          "bubble_fraction": "bubble fraction", "mfu": "MFU"}


def read(path):
    """(swept keys, points as dicts of strings or JSON values)."""
    if path.endswith(".json"):
        with open(path) as f:
            s = json.load(f)
        return s["keys"], s["points"]
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        keys = reader.fieldnames[:reader.fieldnames.index("makespan_s")]
        return keys, list(reader)


def number(v):
    if v is None or v == "":
        return None
    if isinstance(v, bool) or v in ("true", "false"):
        return 1.0 if v in (True, "true") else 0.0
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def failed(p):
    return p.get("error") not in (None, "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("out")
    ap.add_argument("--x")
    ap.add_argument("--y", default="throughput_samples_per_s")
    ap.add_argument("--logx", action="store_true")
    ap.add_argument("--logy", action="store_true")
    args = ap.parse_args()
    keys, points = read(args.sweep)
    x = args.x or keys[0]
    if x not in keys:
        ap.error(f"--x {x}: not a swept key (swept: {', '.join(keys)})")
    if points and args.y not in points[0]:
        ap.error(f"--y {args.y}: not a field of the sweep ({', '.join(points[0])})")
    others = [k for k in keys if k != x]
    numeric_x = all(number(p[x]) is not None for p in points)
    order = OrderedDict()  # x values in the order swept, for categorical axes
    for p in points:
        order.setdefault(str(p[x]), len(order))
    scale = 1 / GIB if args.y == "peak_memory_bytes" else 1.0

    lines = OrderedDict()
    bad = 0
    for p in points:
        if failed(p) or number(p[args.y]) is None:
            bad += 1
            continue
        label = ", ".join(f"{k}={p[k]}" for k in others)
        xv = number(p[x]) if numeric_x else order[str(p[x])]
        lines.setdefault(label, []).append((xv, number(p[args.y]) * scale, number(p["oom"]) == 1))
    fig, ax = plt.subplots(figsize=(WIDTH_IN * 0.75, 5.0))
    for label, pts in lines.items():
        pts.sort()
        (line,) = ax.plot([a for a, _, _ in pts], [b for _, b, _ in pts], "-o", markersize=4,
                          label=label or args.y)
        oom = [(a, b) for a, b, o in pts if o]
        if oom:
            ax.scatter(*zip(*oom), marker="x", s=60, color=line.get_color(), zorder=5)
    if not numeric_x:
        ax.set_xticks(list(order.values()))
        ax.set_xticklabels(list(order), fontsize=8, rotation=30 if len(order) > 6 else 0)
    if args.logx and numeric_x:
        ax.set_xscale("log", base=2)
    if args.logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(LABELS.get(args.y, args.y))
    ax.grid(alpha=0.3)
    if len(lines) > 1 or others:
        legend_above(ax, ncol=min(4, max(1, len(lines))))
    text = f"{len(points)} points"
    if bad:
        text += f"; {bad} failed (or without {args.y}) and not drawn"
    if any(o for pts in lines.values() for _, _, o in pts):
        text += "; x: out of memory"
    note(fig, text)
    save(fig, args.out, bottom_note=True)


if __name__ == "__main__":
    main()

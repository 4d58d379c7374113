#!/usr/bin/env python3
"""Per-GPU timeline (Gantt chart) from `pipesim run --csv ops.csv`.

usage: python3 plots/timeline.py ops.csv out.png [--max-devices N]

One row per device, forwards in blue, backwards in orange, weight-gradient halves in
green, recomputes in grey; transfers are left out (open the --trace in Perfetto for them).
"""
import argparse
import csv
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868", "R": "#8c8c8c", "o": "#c44e52"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--max-devices", type=int, default=64)
    args = ap.parse_args()

    rows = defaultdict(list)
    order = []
    with open(args.csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["stream"] != "compute":
                continue
            if r["device"] not in rows:
                order.append(r["device"])
            start, end = float(r["start_s"]) * 1e3, float(r["end_s"]) * 1e3
            if end > start:
                rows[r["device"]].append((start, end - start, r["op"]))
    order = order[: args.max_devices]
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(order) + 1.2))
    for y, dev in enumerate(order):
        for kind in COLOURS:
            bars = [(s, d) for s, d, op in rows[dev] if op[0] == kind]
            if bars:
                ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=COLOURS[kind], edgecolor="white", linewidth=0.2)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, ["forward", "backward", "weight grad", "recompute", "optimizer"], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()

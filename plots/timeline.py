#!/usr/bin/python3
"""Per-GPU timeline (Gantt chart) from `pipesim run --csv ops.csv`.

usage: plots/timeline.py ops.csv out.png [--report r.json] [--max-rows N]

Forwards in blue, backwards in orange, weight-gradient halves in green, recomputes in grey,
optimizer steps in red; transfers are left out (open the --trace in Perfetto for them).
Up to --max-rows GPUs (default 32) each get a row. Beyond that the GPUs are grouped by
stage (from --report r.json, else by identical op sequences, which is the stage for every
schedule) and each group's row shows its GPU that finishes last; the figure says so. No
GPU is ever left out silently.
"""
import argparse
import csv
import json
from collections import OrderedDict, defaultdict

from plotting import WIDTH_IN, legend_above, note, pyplot, save

plt = pyplot()

KINDS = OrderedDict([("F", ("forward", "#4c72b0")), ("B", ("backward", "#dd8452")),
                     ("W", ("weight grad", "#55a868")), ("R", ("recompute", "#8c8c8c")),
                     ("o", ("optimizer", "#c44e52"))])


def read_ops(path):
    """Compute ops per device, in the CSV's device order: (start ms, duration ms, op)."""
    rows = OrderedDict()
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["stream"] != "compute":
                continue
            start, end = float(r["start_s"]) * 1e3, float(r["end_s"]) * 1e3
            rows.setdefault(r["device"], [])
            if end > start:  # (a weight gradient run inside its backward takes no time)
                rows[r["device"]].append((start, end - start, r["op"]))
    return rows


def groups_of(rows, stages):
    """Devices grouped by stage (or op sequence), in first-seen order."""
    groups = OrderedDict()
    for dev, ops in rows.items():
        if stages:
            key = ("stage", stages.get(dev))
        else:
            key = ("ops", tuple(op for _, _, op in ops))
        groups.setdefault(key, []).append(dev)
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--report", help="the run's --json report, for stage names and grouping")
    ap.add_argument("--max-rows", type=int, default=32)
    args = ap.parse_args()

    rows = read_ops(args.csv)
    stages = {}
    title = "timeline"
    if args.report:
        with open(args.report) as f:
            report = json.load(f)
        stages = {d["name"]: d["stage"] for d in report["devices"]}
        title = f"{report['scenario']} ({report['schedule']})"
    finish = {dev: max((s + d for s, d, _ in ops), default=0.0) for dev, ops in rows.items()}

    if len(rows) <= args.max_rows:
        shown = [(dev, dev + (f"  s{stages[dev]}" if stages.get(dev) is not None else ""))
                 for dev in rows]
        text = f"{len(rows)} GPUs, one row each"
    else:
        groups = groups_of(rows, stages)
        shown = []
        for g, (key, devs) in enumerate(groups.items()):
            last = max(devs, key=lambda d: finish[d])
            name = f"stage {key[1]}" if key[0] == "stage" else f"group {g}"
            more = f" +{len(devs) - 1}" if len(devs) > 1 else ""
            shown.append((last, f"{name}: {last}{more}"))
        text = (f"{len(rows)} GPUs grouped into {len(groups)} rows by "
                f"{'stage' if stages else 'identical op sequence'}: each row shows the group's "
                f"GPU that finishes last (+N: the group's other GPUs)")

    n = len(shown)
    row_in = 0.3 if n <= 32 else max(0.12, 9.6 / n)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.6 + row_in * n))
    for y, (dev, _) in enumerate(shown):
        by_kind = defaultdict(list)
        for s, d, op in rows[dev]:
            kind = op[0] if op[0] in KINDS else "o"
            if d > 0:
                by_kind[kind].append((s, d))
            else:  # an optimizer step that takes no time: a tick where it happens
                ax.plot([s, s], [y - 0.4, y + 0.4], color=KINDS[kind][1], linewidth=1.2)
        for kind, bars in by_kind.items():
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=KINDS[kind][1], edgecolor="white",
                           linewidth=0.2)
    ax.set_yticks(range(n))
    ax.set_yticklabels([label for _, label in shown], fontsize=7 if n <= 64 else 5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, max(finish.values(), default=1.0) * 1.01)
    ax.set_xlabel("time (ms)")
    ax.set_title(title, fontsize=10, pad=22)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, c in KINDS.values()]
    legend_above(ax, handles, [name for name, _ in KINDS.values()], ncol=5)
    note(fig, text)
    save(fig, args.out, bottom_note=True)


if __name__ == "__main__":
    main()

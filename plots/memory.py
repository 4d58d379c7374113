#!/usr/bin/python3
"""Peak memory per GPU, stacked by category, from `pipesim run --json r.json`.

usage: plots/memory.py r.json out.png [--max-bars N]

GPUs are grouped by stage. Up to --max-bars GPUs (default 48) each get a bar; beyond that
each stage gets one bar, the breakdown of its GPU with the highest peak, with a line from
its lowest to its highest peak, and the figure says so. The figure is 1440 px wide however
many GPUs there are.
"""
import argparse
import json
from collections import OrderedDict

from plotting import GIB, WIDTH_IN, legend_above, note, pyplot, save

plt = pyplot()

CATEGORIES = ["weights", "gradients", "optimizer", "activations", "stashed_weights", "other"]
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def by_stage(devices):
    groups = OrderedDict()
    for d in sorted(devices, key=lambda d: d["stage"]):
        groups.setdefault(d["stage"], []).append(d)
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("out")
    ap.add_argument("--max-bars", type=int, default=48)
    args = ap.parse_args()
    with open(args.json) as f:
        report = json.load(f)
    devices = [d for d in report["devices"] if d["stage"] is not None]
    idle = len(report["devices"]) - len(devices)
    groups = by_stage(devices)
    per_gpu = len(devices) <= args.max_bars

    # Bars: (x, device shown, label); stages separated by a gap in per-GPU mode.
    bars, ticks, spans = [], [], []
    x = 0.0
    for stage, devs in groups.items():
        if per_gpu:
            first = x
            for d in devs:
                bars.append((x, d))
                x += 1
            ticks.append(((first + x - 1) / 2, f"stage {stage}"))
            x += 0.6
        else:
            top = max(devs, key=lambda d: d["peak_memory_bytes"])
            bars.append((x, top))
            peaks = [d["peak_memory_bytes"] / GIB for d in devs]
            spans.append((x, min(peaks), max(peaks)))
            ticks.append((x, f"{stage}"))
            x += 1
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.8))
    xs = [b[0] for b in bars]
    bottom = [0.0] * len(bars)
    width = 0.85
    for cat, colour in zip(CATEGORIES, COLOURS):
        vals = [b[1]["memory"][cat] / GIB for b in bars]
        if any(vals):
            ax.bar(xs, vals, width=width, bottom=bottom, color=colour, label=cat, linewidth=0)
            bottom = [b + v for b, v in zip(bottom, vals)]
    for sx, lo, hi in spans:
        ax.plot([sx, sx], [lo, hi], color="black", linewidth=1)
    capacities = sorted({d["capacity_bytes"] for d in devices})
    for cap in capacities:
        ax.axhline(cap / GIB, color="black", linestyle="--", linewidth=1,
                   label="capacity" if cap == capacities[0] else None)
    if per_gpu and len(devices) <= 24:
        ax.set_xticks(xs)
        ax.set_xticklabels([b[1]["name"] for b in bars], rotation=90, fontsize=7)
        sec = ax.secondary_xaxis("top")
        sec.set_xticks([t[0] for t in ticks])
        sec.set_xticklabels([t[1] for t in ticks], fontsize=7)
        sec.tick_params(length=0, pad=1)
    else:
        step = max(1, len(ticks) // 32)  # at most about 32 labels
        ax.set_xticks([t[0] for t in ticks[::step]])
        ax.set_xticklabels([t[1] for t in ticks[::step]], fontsize=7,
                           rotation=0 if per_gpu or len(ticks) <= 32 else 90)
        ax.set_xlabel("stage")
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylabel("GiB at the GPU's peak")
    ax.set_title(f"{report['scenario']} ({report['schedule']}): memory at each GPU's peak",
                 fontsize=10, pad=24)
    legend_above(ax, ncol=7)
    if per_gpu:
        text = f"{len(devices)} GPUs, grouped by stage"
    else:
        text = (f"{len(devices)} GPUs grouped by their {len(groups)} stages: each bar is the "
                f"stage's GPU with the highest peak; the line spans its GPUs' lowest to highest peak")
    if idle:
        text += f"; {idle} GPU{'s' if idle > 1 else ''} without a stage not shown"
    note(fig, text)
    save(fig, args.out, bottom_note=True)


if __name__ == "__main__":
    main()

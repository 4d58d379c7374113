#!/usr/bin/env python3
"""Peak memory per GPU, stacked by category, from `pipesim run --json r.json`.

usage: python3 plots/memory.py r.json out.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CATEGORIES = ["weights", "gradients", "optimizer", "activations", "stashed_weights", "other"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("out")
    args = ap.parse_args()
    with open(args.json) as f:
        report = json.load(f)
    devices = [d for d in report["devices"] if d["stage"] is not None]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(devices) + 2), 4))
    bottom = [0.0] * len(devices)
    for cat in CATEGORIES:
        vals = [d["memory"][cat] / 2**30 for d in devices]
        if any(vals):
            ax.bar(range(len(devices)), vals, bottom=bottom, label=cat)
            bottom = [b + v for b, v in zip(bottom, vals)]
    cap = devices[0]["capacity_bytes"] / 2**30 if devices else 0
    ax.axhline(cap, color="black", linestyle="--", linewidth=1, label="capacity")
    ax.set_xticks(range(len(devices)))
    ax.set_xticklabels([d["name"] for d in devices], rotation=90, fontsize=7)
    ax.set_ylabel("GiB at the peak")
    ax.set_title(f"{report['scenario']} ({report['schedule']})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()

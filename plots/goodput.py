#!/usr/bin/python3
"""Goodput against the checkpoint interval, one line per sweep, from `pipesim sweep --json`.

usage: plots/goodput.py s1.json [s2.json ...] out.png

Each sweep's points vary `training.failures.checkpoint_every` (other keys held); each
point's report carries its `goodput` and the best interval, marked with a dot. The
sweeps of scenarios/examples/failures-at-scale.yaml at three sizes:

  for n in 1024 4096 16384; do
    pipesim sweep scenarios/examples/failures-at-scale.yaml --quiet \\
      --set cluster.nodes=$((n / 8)) --set strategy.data=$n --set training.global_batch=$n \\
      --grid 'training.failures.checkpoint_every=2 min,5 min,10 min,15 min,20 min,30 min,45 min,60 min,90 min,120 min,180 min' \\
      --json g$n.json
  done
  plots/goodput.py g1024.json g4096.json g16384.json plots/goodput.png
"""
import argparse
import json

from plotting import WIDTH_IN, legend_above, note, pyplot, save

plt = pyplot()

KEY = "training.failures.checkpoint_every"
UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def seconds(text):
    number, unit = text.strip().split()
    return float(number) * UNITS[unit]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+")
    args = ap.parse_args()
    *inputs, out = args.sweeps
    if not inputs:
        ap.error("give at least one sweep and the output file")
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.5))
    skipped = 0
    for path in inputs:
        with open(path) as f:
            sweep = json.load(f)
        if KEY not in sweep["keys"]:
            ap.error(f"{path}: the sweep does not vary {KEY}")
        points = [p for p in sweep["points"] if p.get("goodput") is not None]
        skipped += len(sweep["points"]) - len(points)
        if not points:
            continue
        points.sort(key=lambda p: seconds(p[KEY]))
        x = [seconds(p[KEY]) / 60 for p in points]
        y = [100 * p["goodput"] for p in points]
        gpus = points[0]["gpus"]
        line, = ax.plot(x, y, marker="o", markersize=3, label=f"{gpus:,} GPUs")
        best = points[0]["checkpoint_every_optimal_s"] / 60
        ax.axvline(best, color=line.get_color(), linestyle=":", linewidth=1)
        ax.annotate(f"best {best:.0f} min", (best, min(y)), color=line.get_color(), fontsize=8,
                    rotation=90, va="bottom", ha="right")
    ax.set_xscale("log")
    ticks = [2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("checkpoint every (minutes)")
    ax.set_ylabel("goodput (% of wall time making progress)")
    ax.grid(True, which="both", alpha=0.3)
    legend_above(ax)
    note(fig, f"{skipped} point(s) without a goodput left out" if skipped else "")
    save(fig, out, bottom_note=bool(skipped))


if __name__ == "__main__":
    main()

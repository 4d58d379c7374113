#!/usr/bin/python3
"""Predicted (and replayed) vs measured makespan, from `pipesim validate --sweep --json r.json`.

usage: plots/validation.py r.json out.png
"""
import argparse
import json

from plotting import legend_above, note, pyplot, save

plt = pyplot()

MARKERS = {"gpipe": "o", "dapple": "s", "pipedream": "^"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("out")
    args = ap.parse_args()
    with open(args.json) as f:
        report = json.load(f)
    points = report["configurations"]
    summary = report["summary"]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    # With --calibrate the prediction drawn is the calibrated one (each op timed alone on
    # the backend): the scenario's own costs describe a whole GPU, not a partition of it.
    calibrated = all("calibrated_makespan_s" in p for p in points)
    key, label = ("calibrated", "calibrated") if calibrated else ("predicted", "predicted")
    for schedule in sorted({p["schedule"] for p in points}):
        mine = [p for p in points if p["schedule"] == schedule]
        measured = [p["measured_makespan_s"] * 1e3 for p in mine]
        ax.scatter(measured, [p[f"{key}_makespan_s"] * 1e3 for p in mine],
                   marker=MARKERS.get(schedule, "o"), label=f"{schedule} {label}")
        ax.scatter(measured, [p["replay_makespan_s"] * 1e3 for p in mine],
                   marker=MARKERS.get(schedule, "o"), facecolors="none", edgecolors="gray",
                   label=f"{schedule} replay")
    values = [p[k] * 1e3 for p in points
              for k in ("measured_makespan_s", f"{key}_makespan_s", "replay_makespan_s")]
    lo, hi = min(values) * 0.9, max(values) * 1.1
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured makespan (ms)")
    ax.set_ylabel("simulated makespan (ms)")
    backend = points[0]["backend"] if points else "?"
    tau = summary["calibrated_kendall_tau" if calibrated else "kendall_tau"]
    partial = f", {len(points)} configurations (cut short)" if summary.get("partial") else ""
    replay = (f"; replay MAPE {summary['replay_mape'] * 100:.2f} %"
              if "replay_mape" in summary else "")
    note(fig, f"{backend}: {label} MAPE {summary[f'{key}_mape'] * 100:.1f} %, "
         f"Kendall tau {tau:.2f}{replay}{partial}")
    legend_above(ax, ncol=2)
    save(fig, args.out, bottom_note=True)


if __name__ == "__main__":
    main()

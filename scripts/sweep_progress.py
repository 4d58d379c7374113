#!/usr/bin/python3
"""A validation sweep's JSON rebuilt from its progress lines, for a sweep cut short.

`pipesim validate --sweep` writes its JSON only at the end, but prints one line per
configuration on stderr as it goes:
  dapple S=2 M=4 link 64 GB/s: measured 0.4067 s, predicted -40.7 %, replay -0.0 %, calibrated -3.5 %
This reads those lines (from a log holding them) and writes the same "configurations" and
"summary" fields `pipesim validate --sweep --json` writes (makespans rebuilt from the
rounded percentages, so to about 0.1 %), with "partial": true and the count found.

usage: scripts/sweep_progress.py LOG OUT.json [--backend NAME]
"""
import argparse
import json
import re

LINE = re.compile(
    r"^(?P<schedule>\S+) S=(?P<stages>\d+) M=(?P<m>\d+) link (?P<link>.+?): "
    r"measured (?P<measured>[0-9.e+-]+) s, predicted (?P<predicted>[0-9.e+-]+) %, "
    r"replay (?P<replay>[0-9.e+-]+) %(?:, calibrated (?P<calibrated>[0-9.e+-]+) %)?$")


def kendall_tau_b(a, b):
    """Kendall's tau-b, as backend/stats.cc computes it."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                concordant += 1
            else:
                discordant += 1
    denom = ((concordant + discordant + ties_a) * (concordant + discordant + ties_b)) ** 0.5
    return 1.0 if denom == 0 else (concordant - discordant) / denom


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args()
    points = []
    with open(args.log) as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            measured = float(m["measured"])
            p = {"schedule": m["schedule"], "stages": int(m["stages"]),
                 "micro_batches": int(m["m"]), "backend": args.backend, "link": m["link"],
                 "measured_makespan_s": measured}
            for key in ("predicted", "replay", "calibrated"):
                if m[key] is None:
                    continue
                value = measured * (1 + float(m[key]) / 100)
                p[f"{key}_makespan_s"] = value
                p[f"{key}_error"] = abs(value - measured) / measured
            points.append(p)
    if not points:
        raise SystemExit(f"{args.log}: no sweep progress lines")
    measured = [p["measured_makespan_s"] for p in points]
    summary = {"configurations": len(points), "partial": True}
    for key in ("predicted", "replay", "calibrated"):
        if not all(f"{key}_error" in p for p in points):
            continue
        errors = [p[f"{key}_error"] for p in points]
        summary[f"{key}_mape"] = sum(errors) / len(errors)
        summary[f"{key}_max_error"] = max(errors)
        tau = kendall_tau_b([p[f"{key}_makespan_s"] for p in points], measured)
        summary["kendall_tau" if key == "predicted" else f"{key}_kendall_tau"] = tau
    with open(args.out, "w") as f:
        json.dump({"summary": summary, "configurations": points}, f, indent=2)
        f.write("\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

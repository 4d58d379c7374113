#!/usr/bin/python3
"""The planner's Pareto front, iteration time vs peak memory, from `pipesim plan --json p.json`.

usage: plots/pareto.py p.json out.png

Every candidate the plan lists is a dot (grey when it runs out of memory), the front is the
line through the strategies no other beats on both time and memory, the best is a star and
the baselines (PipeDream's and DAPPLE's planners, pure data parallel) are labelled. The axes
span the strategies that fit; out-of-memory points beyond them are counted under the figure.
"""
import argparse
import json

from plotting import GIB, WIDTH_IN, legend_above, note, pyplot, save

plt = pyplot()


def short(c):
    """'dapple 4 stages x2 data' and the like, from a candidate's strategy."""
    st = c["strategy"]
    stages = st.get("stages", [])
    reps = sorted({s.get("replicas", 1) for s in stages})
    text = f"{st.get('schedule', '?')} {len(stages)} st."
    if reps != [1]:
        text += " r" + "/".join(map(str, reps))
    if st.get("tensor", 1) > 1:
        text += f" t{st['tensor']}"
    if st.get("recompute", "none") != "none":
        text += f" {st['recompute']} recompute"
    if st.get("data", 1) > 1:
        text += f" d{st['data']}"
    if c.get("training", {}).get("micro_batch"):
        text += f" b{c['training']['micro_batch']}"
    return text


def point(c):
    return c["iteration_time_s"] * 1e3, c["peak_memory_bytes"] / GIB


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("out")
    args = ap.parse_args()
    with open(args.json) as f:
        plan = json.load(f)
    fig, ax = plt.subplots(figsize=(WIDTH_IN * 0.75, 5.4))
    cands = plan.get("candidates", []) + plan.get("pareto", [])
    fits = [point(c) for c in cands if not c["oom"]]
    oom = [point(c) for c in cands if c["oom"]]
    baselines = [(n, b) for n, b in plan.get("baselines", {}).items()
                 if b and "iteration_time_s" in b]
    # The axes span what fits (out-of-memory points beyond them are left out and counted),
    # so one far-off baseline cannot squash the front into a corner.
    shown = fits + [point(c) for c in plan.get("pareto", [])] + \
        [point(b) for _, b in baselines if not b.get("oom")] + \
        ([point(plan["best"])] if plan.get("best") else [])
    box = None
    if shown:
        xs, ys = [p[0] for p in shown], [p[1] for p in shown]
        dx, dy = (max(xs) - min(xs)) * 0.08 or 1.0, (max(ys) - min(ys)) * 0.08 or 1.0
        box = (min(xs) - dx, max(xs) + dx, min(ys) - dy, max(ys) + dy)

    def inside(p):
        return box is None or (box[0] <= p[0] <= box[1] and box[2] <= p[1] <= box[3])

    left_out = sum(not inside(p) for p in oom)
    left_out += sum(bool(b.get("oom")) and not inside(point(b)) for _, b in baselines)
    oom = [p for p in oom if inside(p)]
    baselines = [(n, b) for n, b in baselines if not b.get("oom") or inside(point(b))]
    if fits:
        ax.scatter(*zip(*fits), s=14, color="#4c72b0", alpha=0.6, label="candidates")
    if oom:
        ax.scatter(*zip(*oom), s=14, color="#bbbbbb", label="out of memory")
    front = sorted((point(c), c) for c in plan.get("pareto", []))
    if front:
        ax.plot([p[0] for p, _ in front], [p[1] for p, _ in front], "-o", color="#dd8452",
                markersize=5, label="Pareto front")
        span = max(p[0] for p, _ in front) - min(p[0] for p, _ in front) or 1.0
        last = None
        for (x, y), c in front:  # labels only where they do not run into the previous one
            if last is None or abs(x - last[0]) > 0.06 * span or abs(y - last[1]) > 0.5:
                ax.annotate(short(c), (x, y), textcoords="offset points", xytext=(5, 4),
                            fontsize=7)
                last = (x, y)
    for name, b in baselines:
        x, y = point(b)
        ax.scatter([x], [y], marker="s", s=36, facecolors="none", edgecolors="black")
        ax.annotate(f"{name}: {short(b)}", (x, y), textcoords="offset points",
                    xytext=(5, -10), fontsize=7)
    if plan.get("best"):
        x, y = point(plan["best"])
        ax.scatter([x], [y], marker="*", s=220, color="#c44e52", zorder=5,
                   label=f"best: {short(plan['best'])}")
    if box is not None:
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
    ax.set_xlabel("iteration time (ms)")
    ax.set_ylabel("peak memory of the fullest GPU (GiB)")
    ax.set_title("planner: iteration time vs peak memory", fontsize=10, pad=22)
    ax.grid(alpha=0.3)
    legend_above(ax, ncol=4)
    beyond = f"; {left_out} out-of-memory point(s) beyond the axes left out" if left_out else ""
    note(fig, f"{len(cands)} simulated strategies of {plan.get('explored', '?')} costed; "
              f"squares: baselines{beyond}")
    save(fig, args.out, bottom_note=True)


if __name__ == "__main__":
    main()

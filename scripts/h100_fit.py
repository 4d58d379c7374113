#!/usr/bin/env python3
"""Write the H100 validation scenarios and compare pipesim with the published runs.

  scripts/h100_fit.py write              # scenarios/validation/<row>.yaml from scripts/h100_rows.py
  scripts/h100_fit.py compare [--set K=V] [--group moe-cp] [--rows NAME-PREFIX]
                                         # one line per row: measured, simulated, error
  scripts/h100_fit.py table               # the same as a Markdown table (docs/validation.md)
  scripts/h100_fit.py scan SETTINGS.json  # mean / max error per GPU set for each candidate fit
  scripts/h100_fit.py scan SETTINGS.json --gpus b200,gb200
                                         # the same on those GPUs' rows alone (all of them)

Run from the repository root after building (build/pipesim). The rows and their sources
are in scripts/h100_rows.py and scripts/torchtitan_rows.py; docs/validation.md gives the
results.
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from h100_rows import ROWS as PUBLISHED  # noqa: E402
from torchtitan_rows import ROWS as TORCHTITAN  # noqa: E402

ROWS = PUBLISHED + TORCHTITAN

PIPESIM = os.environ.get("PIPESIM", "build/pipesim")
OUT = "scenarios/validation"


def cluster(row):
    nodes = max(row["gpus"] // 8, 1)
    if row["gpu"].startswith("a100"):
        # A100 rows of llm-foundry: 8 x 200 Gbit/s RoCE per node ("1600 Gbps node-node");
        # NVSwitch as NCCL drives it (docs/validation.md, "NVSwitch as NCCL drives it").
        return dict(gpu=row["gpu"], nodes=nodes, gpus_per_node=8,
                    intra_node=dict(preset="nvswitch2", bandwidth="220 GB/s"),
                    inter_node=dict(kind="ethernet", bandwidth="200 Gbit/s", latency="5 us",
                                    nics=8))
    # Blackwell Ultra's ConnectX-8 ports run at 800 Gbit/s, the others' ConnectX-7 at 400.
    port = "ib-xdr" if row["gpu"] in ("b300", "gb300") else "ib-ndr"
    if row["gpu"] in ("gb200", "gb300"):
        # NVL72 racks, 64 GPUs of each in the job, one port per GPU.
        per = min(row["gpus"], 64)
        return dict(gpu=row["gpu"], nodes=row["gpus"] // per, gpus_per_node=per,
                    intra_node="nvlink5", inter_node=dict(preset=port, nics=per))
    gpu = dict(preset=row["gpu"], **row["gpu_fields"]) if row.get("gpu_fields") else row["gpu"]
    return dict(gpu=gpu, nodes=nodes, gpus_per_node=8,
                intra_node="nvlink5" if row["gpu"] in ("b200", "b300") else "nvswitch",
                inter_node=dict(preset=port, nics=8))


def scenario(row):
    model = dict(generator="transformer", **row["model"], sequence=row["seq"],
                 flash_attention=True)
    if row.get("attention_kernel"):
        model["attention_kernel"] = row["attention_kernel"]
    cp, ep = row.get("cp", 1), row.get("ep", 1)
    data = row["gpus"] // (row["tp"] * row["pp"] * cp)
    strategy = dict(schedule="interleaved" if row["vp"] > 1 else "dapple",
                    pipeline=row["pp"], tensor=row["tp"])
    if row.get("stages"):  # a recipe's own layout: each stage's layers, in pipeline order
        strategy = dict(schedule=strategy["schedule"],
                        stages=[dict(layers=r) for r in row["stages"]], tensor=row["tp"])
    if row["vp"] > 1:
        strategy["virtual_stages"] = row["vp"]
    if row["tp"] > 1:
        strategy.update(sequence_parallel=True,
                        tensor_overlap=row.get("tensor_overlap", "backward"))
    strategy["data"] = data
    if cp > 1:
        strategy["context"] = cp
        if row.get("context_comm"):
            strategy["context_comm"] = row["context_comm"]
    if ep > 1:
        strategy["expert"] = ep
        if row.get("dispatch", "alltoall") != "alltoall":
            strategy["expert_dispatch"] = row["dispatch"]
    if row.get("etp", 1) > 1:
        strategy["expert_tensor"] = row["etp"]
    if row.get("shared_expert_overlap"):
        strategy["shared_expert_overlap"] = True
    strategy["zero"] = row["zero"]
    if row["framework"] == "megatron" or row.get("overlap_param_gather"):
        strategy["overlap_param_gather"] = True
    strategy["recompute"] = row["recompute"]
    if row.get("recompute_modules"):
        strategy["recompute_modules"] = row["recompute_modules"]
    if row.get("offload_layers"):
        strategy["offload_layers"] = row["offload_layers"]
    training = dict(global_batch=row["gbs"], micro_batch=row["mbs"], precision=row["precision"],
                    gradients=row["gradients"], optimizer="adam")
    if row.get("fp8_params"):
        training["fp8_params"] = True
    for key in ("optimizer_state", "master_weights"):
        if row.get(key):
            training[key] = row[key]
    return dict(name=row["name"], cluster=cluster(row), model=model, training=training,
                strategy=strategy)


def header(row):
    lines = [f"{row['name']}: {row['source']}.",
             f"Measured {row['measured']:.1f} tokens/s per GPU"
             + (f" ({row['note']})" if row.get("note") else "") + ".",
             f"Written by scripts/h100_fit.py from {row.get('rows_file', 'scripts/h100_rows.py')}; "
             "docs/validation.md has the comparison."]
    return "".join(f"# {line}\n" for line in lines)


def write():
    for row in ROWS:
        with open(f"{OUT}/{row['name']}.yaml", "w") as f:
            f.write(header(row))
            yaml.safe_dump(scenario(row), f, sort_keys=False, default_flow_style=None, width=96)


def simulate(row, sets, gpu_override=None):
    path = f"{OUT}/{row['name']}.yaml"
    tmp = None
    if gpu_override is not None:
        s = scenario(row)
        s["cluster"]["gpu"] = {"preset": row["gpu"], **row.get("gpu_fields", {}), **gpu_override}
        tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        yaml.safe_dump(s, tmp)
        tmp.close()
        path = tmp.name
    args = [PIPESIM, "run", path, "--json", "-"]
    for s in sets:
        args += ["--set", s]
    try:
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode not in (0, 1) or not run.stdout:  # 1: out of memory, still reported
            raise RuntimeError(f"{' '.join(args)}: {run.stderr.strip()}")
        out = run.stdout
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    report = json.loads(out)
    return report["tokens_per_s"] / row["gpus"], report


def errors(rows, sets=(), gpu_override=None):
    result = []
    for row in rows:
        if row.get("too_large"):
            print(f"{row['name']:34s} not simulated (over the op cap)", file=sys.stderr)
            continue
        sim, report = simulate(row, sets, gpu_override)
        result.append((row, sim, sim / row["measured"] - 1, report))
    return result


def summary(result):
    errs = [abs(e) for _, _, e, _ in result]
    return sum(errs) / len(errs), max(errs)


def compare(sets, only=None, prefix=""):
    rows = [r for r in ROWS if (only is None or r.get("group") == only)
            and r["name"].startswith(prefix)]
    result = errors(rows, sets)
    for row, sim, err, rep in result:
        print(f"{row['name']:34s} {row['measured']:9.1f} {sim:9.1f} {100 * err:+6.1f} %"
              f"  mfu {100 * rep['mfu']:4.1f}{'  OOM' if rep['oom'] else ''}")
    sets = {}  # held-out rows by their set's label
    for r in result:
        if r[0].get("held_out"):
            sets.setdefault(r[0]["held_out"], []).append(r)
    for label, held in sets.items():
        mean, worst = summary(held)
        print(f"held out (no fit used them), {label}: {len(held)} rows, mean |error| "
              f"{100 * mean:.1f} %, max {100 * worst:.1f} %")
    result = [r for r in result if not r[0].get("held_out")]
    sub = [r for r in result if r[0].get("group") == "moe-cp"]
    if sub:
        mean, worst = summary(sub)
        print(f"context/expert: {len(sub)} rows, mean |error| {100 * mean:.1f} %, "
              f"max {100 * worst:.1f} %")
    for tag in ("h100", "a100", "b200", "gb200", "b300", "gb300"):
        sub = [r for r in result if r[0]["gpu"].startswith(tag) and "group" not in r[0]]
        if sub:
            mean, worst = summary(sub)
            print(f"{tag}: {len(sub)} rows, mean |error| {100 * mean:.1f} %, max {100 * worst:.1f} %")
    pairs = {}
    for row, sim, _, _ in result:
        if row["name"].startswith("foundry"):
            pairs.setdefault(row["name"].rsplit("-", 1)[0], {})[row["gpu"][:4]] = (row, sim)
    ratio_errs = []
    for key, p in sorted(pairs.items()):
        if "h100" in p and "a100" in p:
            measured = p["h100"][0]["measured"] / p["a100"][0]["measured"]
            simulated = p["h100"][1] / p["a100"][1]
            ratio_errs.append(simulated / measured - 1)
            print(f"ratio {key:26s} measured {measured:.2f} simulated {simulated:.2f} "
                  f"{100 * (simulated / measured - 1):+5.1f} %")
    if ratio_errs:
        print(f"H100/A100 ratio: mean |error| {100 * sum(map(abs, ratio_errs)) / len(ratio_errs):.1f} %,"
              f" max {100 * max(map(abs, ratio_errs)):.1f} %")


def table():
    print("| row | GPUs | layout | precision | measured tokens/s/GPU | pipesim | error |")
    print("|---|---|---|---|---|---|---|")
    for row, sim, err, rep in errors(ROWS):
        layout = f"TP{row['tp']} PP{row['pp']}" + (f" VP{row['vp']}" if row["vp"] > 1 else "")
        layout += f" DP{row['gpus'] // (row['tp'] * row['pp'])} MBS{row['mbs']} GBS{row['gbs']}"
        layout += f" seq {row['seq']}, ZeRO-{row['zero']}"
        if row["recompute"] != "none":
            layout += f", {row['recompute']} recompute"
        print(f"| {row['name']} | {row['gpus']} {row['gpu']} | {layout} | {row['precision']} | "
              f"{row['measured']:.0f} | {sim:.0f} | {100 * err:+.1f} % |")


def scan(path, gpus=None):
    """Each candidate of SETTINGS.json ({"label": {cluster.gpu overrides}, ...}) on every
    H100, B200 and GB200 row, two rows at a time: the mean and max absolute error per set,
    as in docs/presets.md's scan tables. With `gpus`, every row of those GPUs (one
    generation's fit), by GPU."""
    from concurrent.futures import ThreadPoolExecutor
    candidates = json.load(open(path))
    # The Grok-1 rows and those marked slow take minutes each: `compare` runs them.
    rows = [r for r in ROWS if not r.get("too_large") and not r["gpu"].startswith("a100")
            and "grok" not in r["name"] and not r.get("slow") and not r.get("held_out")]
    if gpus:
        rows = [r for r in ROWS if not r.get("too_large") and r["gpu"] in gpus
                and not r.get("held_out")]
    for label, override in candidates.items():
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            sims = list(pool.map(lambda r: simulate(r, (), override or None)[0], rows))
        sets = {}
        for row, sim in zip(rows, sims):
            tag = row["gpu"] if gpus else row.get("group") or row["gpu"].split("-")[0]
            if gpus:
                sets.setdefault("all", []).append(abs(sim / row["measured"] - 1))
                sets.setdefault(row["precision"], []).append(abs(sim / row["measured"] - 1))
            elif tag == "h100":  # by source: nemo, dgxc, megatron, foundry, foundry-large
                tag = "-".join(row["name"].split("-")[:2 if "large" in row["name"] else 1])
            if row["gpu"].startswith("h100") and not row.get("group"):
                sets.setdefault("h100", []).append(abs(sim / row["measured"] - 1))
            if row["gpu"].startswith("h100"):
                sets.setdefault("h100+cp/moe", []).append(abs(sim / row["measured"] - 1))
            if row["gpu"].startswith("h100") and row["model"].get("mlp") == "swiglu":
                sets.setdefault("llama", []).append(abs(sim / row["measured"] - 1))
            sets.setdefault(tag, []).append(abs(sim / row["measured"] - 1))
        line = "  ".join(f"{t} {100 * sum(e) / len(e):.1f}/{100 * max(e):.1f}"
                         for t, e in sorted(sets.items()))
        print(f"{label:28s} {line}", flush=True)


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "compare"
    if cmd == "write":
        write()
    elif cmd == "table":
        table()
    elif cmd == "scan":
        args = sys.argv[3:]
        scan(sys.argv[2], args[args.index("--gpus") + 1].split(",") if "--gpus" in args else None)
    elif cmd == "compare":
        args = sys.argv[2:]
        only, prefix = None, ""
        if "--rows" in args:
            prefix = args[args.index("--rows") + 1]
            args = args[:args.index("--rows")] + args[args.index("--rows") + 2:]
        if "--group" in args:
            only = args[args.index("--group") + 1]
            args = args[:args.index("--group")] + args[args.index("--group") + 2:]
        sets = [a.split("=", 1)[1] if a.startswith("--set=") else a
                for a in args if a != "--set"]
        compare(sets, only, prefix)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

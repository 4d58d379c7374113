#!/usr/bin/env python3
"""DAPPLE's published setups through `pipesim plan` and its baselines.

    scripts/dapple_seeds.py [pipesim binary]

For each zoo model DAPPLE evaluated, on 2 servers of 8 V100s (NVLink inside, 25 Gbit/s
Ethernet between: the p3.16xlarge of DAPPLE's analysis_dapple.py) at the batch sizes below: the planner's best, the
three baselines (PipeDream's planner, DAPPLE's planner, plain data parallelism), each
simulated, and DAPPLE's schedule against GPipe on the plan DAPPLE's planner chose (same
stages, same micro-batches): throughput and peak memory. Prints a Markdown table.
The scenarios go to a temporary directory.
"""
import json
import os
import subprocess
import sys
import tempfile

# model include, global batch, micro-batch: the batch sizes DAPPLE's planner is run with in
# its repository's tests (AlibabaPAI/DAPPLE planner/tests/speedup_test.rs @ c06dcf1d6, 16
# devices in groups of 8; XLNet-36 from its PBS 1, GBS 128 row); the paper's own tables were
# not reachable.
MODELS = [
    ("vgg19", 512, 32),
    ("gnmt16", 512, 32),
    ("bert48", 128, 2),
    ("amoebanet36", 512, 8),
    ("xlnet36", 128, 1),
]

CLUSTER = """cluster:
  gpu: v100-16gb
  nodes: 2
  gpus_per_node: 8
  intra_node: nvlink
  inter_node: eth25
"""


def scenario(model, global_batch, micro_batch):
    return (f"name: dapple-{model}\n{CLUSTER}model: {{include: {model}}}\n"
            f"training:\n  global_batch: {global_batch}\n  micro_batch: {micro_batch}\n"
            "  precision: mixed\n  optimizer: adam\n"
            "strategy:\n  schedule: dapple\n  pipeline: 1\n  data: 16\n")


def pipesim(binary, *args):
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=False)
    if out.returncode not in (0, 1):
        raise RuntimeError(out.stderr.strip())
    return out


def throughput(entry):
    if not entry or entry.get("oom", True):
        return None
    return entry["throughput_samples_per_s"]


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def schedule_pair(binary, path, strategy):
    """DAPPLE's schedule, GPipe and GPipe with recomputation on the same stages: their JSON
    reports."""
    runs = []
    for kind in ("dapple", "gpipe", "gpipe-recompute"):
        s = dict(strategy, schedule=kind)
        s.pop("warmup", None)
        out = pipesim(binary, "run", path, "--set", "strategy=" + json.dumps(s), "--json", "-",
                      "--reproducible")
        runs.append(json.loads(out.stdout))
    return runs


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/pipesim"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, gb, mb in MODELS:
            path = os.path.join(tmp, f"{model}.yaml")
            with open(path, "w") as f:
                f.write(scenario(model, gb, mb))
            plan = json.loads(pipesim(binary, "plan", path, "--json", "-").stdout)
            best = throughput(plan["best"])
            base = plan["baselines"]
            pd, da, dp = (throughput(base.get(k, {}).get("result", base.get(k)))
                          for k in ("pipedream", "dapple", "data_parallel"))
            d_run, g_run, r_run = schedule_pair(binary, path, base["dapple"]["strategy"])
            rows.append((model, gb, mb, best, pd, da, dp, d_run, g_run, r_run,
                         base["dapple"].get("note", "")))
    print("| model | batch | planner | PipeDream's | DAPPLE's | data parallel | DAPPLE/PipeDream "
          "| DAPPLE/DP | DAPPLE vs GPipe: throughput, memory | vs GPipe + recompute |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, gb, mb, best, pd, da, dp, d_run, g_run, r_run, note in rows:
        def vs(other):
            t = d_run["throughput_samples_per_s"] / other["throughput_samples_per_s"]
            peak = lambda r: max(g["peak_memory_bytes"] for g in r["devices"])
            return f"{t:.2f}x, {peak(d_run) / peak(other) - 1:+.0%}"
        cell = lambda x: f"{x:.1f}" if x else "OOM"
        print(f"| {model} | {gb} ({mb}) | {cell(best)} | {cell(pd)} | {cell(da)} | {cell(dp)} "
              f"| {ratio(da, pd)} | {ratio(da, dp)} | {vs(g_run)} | {vs(r_run)} |")
        print(f"|  | {note} ||||||||")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The planner against its own --exhaustive enumeration on random small cases.

    scripts/planner_vs_exhaustive.py [first_seed] [count] [pipesim binary]

Each seed makes a scenario (2-4 nodes of 1-4 GPUs, at most 8 GPUs; 8-11 layers with random
forward times, activations, outputs and parameters; 1-100 Gbit/s between nodes; micro-batch
2 or 4; a quarter of them on 1 GiB GPUs), runs `pipesim plan` and `pipesim plan
--exhaustive` on it and prints both bests and their ratio. Spaces past --exhaustive's limit
are reported and skipped. The scenarios go to a temporary directory.
"""
import json
import random
import subprocess
import sys
import tempfile


def scenario(seed):
    r = random.Random(seed)
    nodes = r.choice([2, 3, 4])
    gpn = r.choice([1, 2, 3, 4])
    while nodes * gpn > 8:
        gpn -= 1
    layers = r.randint(8, 11)
    inter = r.choice(["1 Gbit/s", "10 Gbit/s", "25 Gbit/s", "100 Gbit/s"])
    mb = r.choice([2, 4])
    gb = mb * r.choice([4, 8])
    tight = r.random() < 0.25
    gpu = ("{name: small, memory: 1 GiB, peak: 125 TFLOPS, hbm_bandwidth: 900 GB/s}"
           if tight else "v100-16gb")
    rows = ""
    for i in range(layers):
        f = r.choice([0.5, 1, 2, 3, 4, 6])
        act = r.choice([10, 20, 40]) if tight else r.choice([10, 40, 100, 200, 400])
        out = r.choice([1, 4, 20, 50, 100, 200])
        params = r.choice(["1M", "5M", "10M"]) if tight else r.choice(
            ["100K", "1M", "5M", "20M", "50M"])
        rows += (f"    - {{name: l{i}, forward: {f} ms, backward: {2 * f} ms, "
                 f"activation: {act} MiB, output: {out} MiB, params: {params}}}\n")
    text = f"""name: unseen{seed}
cluster:
  gpu: {gpu}
  nodes: {nodes}
  gpus_per_node: {gpn}
  intra_node: nvlink
  inter_node: {{kind: ethernet, bandwidth: {inter}, latency: 10 us}}
model:
  layers:
{rows}training:
  global_batch: {gb}
  micro_batch: {mb}
  precision: fp32
  optimizer: momentum
strategy:
  schedule: dapple
  pipeline: 1
"""
    return text, f"{nodes}x{gpn}, {layers} layers, {inter}, micro-batch {mb}, batch {gb}" + (
        ", 1 GiB GPUs" if tight else "")


def best(binary, path, extra):
    p = subprocess.run([binary, "plan", path, "--json", "-", "--quiet"] + extra,
                       capture_output=True, text=True)
    if p.returncode not in (0, 1):
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    j = json.loads(p.stdout)
    return (j.get("best") or {}).get("throughput_samples_per_s"), j.get("simulated")


def main():
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    binary = sys.argv[3] if len(sys.argv) > 3 else "build/pipesim"
    with tempfile.TemporaryDirectory() as d:
        for seed in range(first, first + count):
            text, what = scenario(seed)
            path = f"{d}/unseen{seed}.yaml"
            with open(path, "w") as f:
                f.write(text)
            plan, simulated = best(binary, path, [])
            full, enumerated = best(binary, path, ["--exhaustive"])
            if plan is None or full is None:
                print(f"seed {seed} ({what}): skipped: {simulated if plan is None else enumerated}")
                continue
            print(f"seed {seed} ({what}): plan {plan:.2f} samples/s ({simulated} simulated), "
                  f"exhaustive {full:.2f} ({enumerated} simulated), ratio {plan / full:.4f}",
                  flush=True)


if __name__ == "__main__":
    main()

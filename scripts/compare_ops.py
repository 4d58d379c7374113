#!/usr/bin/env python3
"""Puts scripts/gpu_ops.py's measurements next to pipesim's op costs for the same shapes.

    scripts/compare_ops.py OPS.json [--gpu h200] [--pipesim build/pipesim] [--markdown]

For each measured layer: a one-layer scenario of its model preset on the GPU preset at its
tensor degree, `pipesim model --ops --json -` on it, and per op one rank's forward and
backward, measured against predicted (ratio = predicted / measured: below 1, pipesim is
too fast). Then the GEMM, attention and memory grids against the preset's peaks
(efficiency = achieved / peak), to read beside the efficiency curves of docs/presets.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# pipesim's op for each measured one (the first of a pair: ln1 for both norms, and so on)
OP_NAMES = {"ln": "ln1", "qkv": "qkv", "rotary": "rotary", "attention": "flash_attention",
            "projection": "projection", "residual_add": "dropout_add1", "fc1": "fc1",
            "activation": None, "fc2": "fc2"}
PRESETS = {"llama3-8b": "llama3-8b", "llama3-70b-tp8": "llama3-70b",
           "gpt3-175b-tp8": "gpt3-175b", "llama3.1-405b-tp8": "llama3.1-405b"}
PEAKS = {"h100-80gb": (989e12, 1979e12, 3.35e12), "h200": (989e12, 1979e12, 4.8e12)}


def predicted(pipesim, gpu, name, cfg):
    t = cfg["tensor"]
    yaml = f"""name: {name}
cluster: {{gpu: {gpu}, nodes: 1, gpus_per_node: {max(t, 1)}, intra_node: nvlink4}}
model: {{include: {ROOT}/scenarios/models/{PRESETS[name]}.yaml, layers: 1, flash_attention: true}}
training: {{global_batch: 1, micro_batch: {cfg["micro_batch"]}, precision: mixed}}
strategy: {{schedule: 1f1b, pipeline: 1, tensor: {t}}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(yaml)
    try:
        out = subprocess.run([pipesim, "model", f.name, "--ops", "--json", "-"], check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    layer = next(l for l in json.loads(out)["layers"] if l["name"] == "layer0")
    key = "rank_" if t > 1 else ""
    ops = {}
    for op in layer["ops"]:
        ops[op["name"]] = (op[key + "forward_s"],
                           op[key + "backward_input_s"] + op[key + "backward_weight_s"])
    return ops


def layer_rows(res, pipesim, gpu):
    rows = []
    for name, m in res.get("layers", {}).items():
        if "error" in m:
            rows.append((name, "error", m["error"]))
            continue
        pred = predicted(pipesim, gpu, name, m["config"])
        act = "swiglu" if m["config"]["mlp"] == "swiglu" else "gelu"
        for op, meas in m["ops"].items():
            p = pred.get(OP_NAMES[op] or act)
            if p is None:
                continue
            mb = meas.get("backward_input_s", 0) + meas.get("backward_weight_s", 0)
            rows.append((name, op, meas["forward_s"], p[0], mb, p[1]))
        lf = m["layer"]["forward_s"]
        lb = m["layer"]["forward_backward_s"] - lf
        rows.append((name, "layer", lf, sum(v[0] for v in pred.values()),
                     lb, sum(v[1] for v in pred.values())))
    return rows


def spread(values):
    """'median (min-max)' of efficiencies, '' for none."""
    if not values:
        return ""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def fmt_ms(s):
    return f"{s * 1e3:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ops")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--pipesim", default=os.path.join(ROOT, "build", "pipesim"))
    a = ap.parse_args()
    res = json.load(open(a.ops))
    peak, peak8, hbm = PEAKS[a.gpu]
    print(f"# {res['device']} ({res['sms']} SMs), torch {res['torch']}, CUDA {res['cuda']}, "
          f"cuDNN {res['cudnn']}; pipesim preset {a.gpu}\n")
    print("| layer | op | fwd measured ms | fwd pipesim ms | ratio | bwd measured ms "
          "| bwd pipesim ms | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in layer_rows(res, a.pipesim, a.gpu):
        if r[1] == "error":
            print(f"| {r[0]} | error | {r[2]} | | | | | |")
            continue
        n, op, mf, pf, mb, pb = r
        rb = f"{pb / mb:.2f}" if mb > 0 else ""
        print(f"| {n} | {op} | {fmt_ms(mf)} | {fmt_ms(pf)} | {pf / mf:.2f} | "
              f"{fmt_ms(mb)} | {fmt_ms(pb)} | {rb} |")
    gemm = [g for g in res.get("gemm", []) if "bf16_s" in g]
    if gemm:
        print("\n| GEMM FLOP (m n k over the grid) | shapes | bf16 efficiency median (min-max) "
              "| fp8 efficiency median (min-max) |")
        print("|---|---|---|---|")
        by = {}
        for g in gemm:
            by.setdefault(g["flops"], []).append(g)
        for fl in sorted(by):
            e = [g["flops"] / g["bf16_s"] / peak for g in by[fl]]
            e8 = [g["flops"] / g["fp8_s"] / peak8 for g in by[fl] if "fp8_s" in g]
            print(f"| {fl / 1e9:.1f} GFLOP | {len(e)} | {spread(e)} | {spread(e8)} |")
    if res.get("attention"):
        print("\n| attention (causal) | FLOP fwd | fwd efficiency | bwd efficiency (2.5x FLOP) |")
        print("|---|---|---|---|")
        for r in res["attention"]:
            f = r["causal_flops"]
            print(f"| s {r['seq']}, {r['heads']} heads / {r['groups']} kv, d {r['dim']} | "
                  f"{f / 1e9:.1f} G | {f / r['forward_s'] / peak:.2f} | "
                  f"{2.5 * f / r['backward_s'] / peak:.2f} |")
    if res.get("memory"):
        print("\n| bytes per tensor | copy (read + write) of HBM | add (2 reads + write) |")
        print("|---|---|---|")
        for r in res["memory"]:
            b = r["bytes_each"]
            print(f"| {b / 2**20:.0f} MiB | {2 * b / r['copy_s'] / hbm:.2f} | "
                  f"{3 * b / r['add_s'] / hbm:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

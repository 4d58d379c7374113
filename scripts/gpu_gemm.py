#!/usr/bin/env python3
"""Times GEMMs without the host's launch: fp8 against bf16 where today's experts run.

scripts/gpu_ops.py times each op alone between two CUDA events, so an op shorter than the
host's launch (about 35 us for a bf16 GEMM, 40 us for an fp8 one through PyTorch) is timed
at the launch: its grid cannot say how fast the small fp8 GEMMs of fine-grained experts
are. This script times every op twice:
- graph: `reps` copies captured back to back in one CUDA graph, the replay's time over
  reps (the kernels' own time, as a framework under CUDA graphs or with the GPU ahead of
  the host sees it);
- eager: one launch between two events, as gpu_ops.py did (the host's share included).

What it times (median of replays after warm-ups):
- the GEMM grid, m, n, k in {1024, ..., 16384}, in bf16 (cuBLAS) and fp8
  (`torch._scaled_mm`, e4m3, per-tensor scales, cuBLASLt);
- one expert's six GEMMs (forward, input gradient, weight gradient of both layers of a
  gated MLP) at the widths of Qwen3-30B-A3B (hidden 2048, expert 768), Qwen3-235B-A22B
  (4096, 1536) and DeepSeek-V3 (7168, 2048), 1024 to 8192 tokens an expert, both precisions;
- per-tensor current scaling before an fp8 GEMM, as Transformer Engine's recipe does it:
  the tensor's amax (one reduction), then the scaled cast to e4m3, for the same tensors.

    python3 scripts/gpu_gemm.py OUT.json [--quick]
    python3 scripts/gpu_gemm.py OUT.json --cpu   # every code path at tiny sizes, eager, no figure

A measurement that fails records its error and the script goes on; the JSON is written
after each part, so a run cut short keeps what it measured.
"""
import json
import statistics
import sys
import time

import torch

from gpu_ops import guarded, timed  # the same timing, one op between two events

BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)
CPU = "--cpu" in sys.argv
DEV = "cpu" if CPU else "cuda"


def eager_time(fn, reps=10, warm=3):
    """Median seconds of one fn() between two events (the host's launch included)."""
    if not CPU:
        return timed(fn, reps, warm)
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def graph_time(fn, reps, replays=7):
    """Median seconds of one fn() over replays of a graph holding reps of them."""
    if CPU:
        return eager_time(fn, reps=3, warm=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-ups outside the capture (workspaces, heuristics)
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    del graph
    return statistics.median(times)


def reps_for(flops):
    """Copies a graph holds: about 0.5 TFLOP of work, 2 to 50 ops (outputs stay small)."""
    return max(2, min(50, int(5e11 / flops)))


def gemm_times(m, k, n):
    """bf16 and fp8 (m x k) @ (k x n), graph and eager; an fp8 failure is recorded."""
    flops = 2.0 * m * n * k
    row = {"m": m, "k": k, "n": n, "flops": flops}
    reps = reps_for(flops)
    a = torch.randn(m, k, device=DEV, dtype=BF16)
    b = torch.randn(k, n, device=DEV, dtype=BF16)
    try:
        row["bf16_graph_s"] = graph_time(lambda: a @ b, reps)
        row["bf16_eager_s"] = eager_time(lambda: a @ b)
    except Exception as exc:  # (one shape's failure keeps the others)
        row["bf16_error"] = f"{type(exc).__name__}: {exc}"
    try:
        a8 = a.to(FP8)
        b8 = b.t().contiguous().to(FP8).t()  # column-major, as cuBLASLt's fp8 GEMM takes it
        one = torch.ones((), device=DEV, dtype=torch.float32)

        def fp8():
            return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=BF16)

        row["fp8_graph_s"] = graph_time(fp8, reps)
        row["fp8_eager_s"] = eager_time(fp8)
    except Exception as exc:
        row["fp8_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(row), flush=True)
    return row


def gemm_grid(sizes):
    return [gemm_times(m, k, n) for m in sizes for n in sizes for k in sizes]


# One expert's GEMMs in a gated MLP of hidden h and width f over T tokens, (m, k, n):
# fc1 (h -> 2f) and fc2 (f -> h), forward, input gradient, weight gradient.
def expert_shapes(h, f, T):
    return {
        "fc1_fwd": (T, h, 2 * f), "fc2_fwd": (T, f, h),
        "fc1_dgrad": (T, 2 * f, h), "fc2_dgrad": (T, h, f),
        "fc1_wgrad": (h, T, 2 * f), "fc2_wgrad": (f, T, h),
    }


EXPERTS = [("qwen3-30b-a3b", 2048, 768), ("qwen3-235b-a22b", 4096, 1536),
           ("deepseek-v3", 7168, 2048)]


def expert_grid(tokens, models):
    rows = []
    for name, h, f in models:
        for T in tokens:
            for op, (m, k, n) in expert_shapes(h, f, T).items():
                row = gemm_times(m, k, n)
                row.update({"model": name, "hidden": h, "expert_ffn": f, "tokens": T, "op": op})
                rows.append(row)
    return rows


def scaling_grid(shapes):
    """Per-tensor current scaling of a bf16 tensor: its amax, then the scaled cast to e4m3."""
    rows = []
    for rows_, cols in shapes:
        x = torch.randn(rows_, cols, device=DEV, dtype=BF16)
        row = {"rows": rows_, "cols": cols, "bytes": x.numel() * x.element_size()}

        def amax():
            return torch.linalg.vector_norm(x, ord=float("inf"))

        def cast(s=torch.ones((), device=DEV, dtype=torch.float32)):
            return (x.float() * s).to(FP8) if FP8 is not None else x

        def both():
            s = 448.0 / amax().float().clamp(min=1e-12)
            return cast(s)

        reps = max(2, min(50, int(2e9 / row["bytes"])))
        for key, fn in (("amax", amax), ("cast", cast), ("scale", both)):
            try:
                row[f"{key}_graph_s"] = graph_time(fn, reps)
                row[f"{key}_eager_s"] = eager_time(fn)
            except Exception as exc:
                row[f"{key}_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(paths) != 1:
        sys.exit("usage: gpu_gemm.py OUT.json [--quick] [--cpu]")
    out = paths[0]
    quick = "--quick" in sys.argv or CPU
    t0 = time.time()
    if CPU:
        res = {"device": "cpu (a check of the script: no figure)", "torch": torch.__version__}
    else:
        p = torch.cuda.get_device_properties(0)
        res = {"device": torch.cuda.get_device_name(0), "sms": p.multi_processor_count,
               "memory_bytes": p.total_memory, "torch": torch.__version__,
               "cuda": torch.version.cuda}
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
            torch.backends.cuda.matmul.fp32_precision = "ieee"
        else:
            torch.backends.cuda.matmul.allow_tf32 = False

    def save():
        res["elapsed_s"] = time.time() - t0
        with open(out, "w") as f:
            json.dump(res, f, indent=1)

    sizes = (64, 128) if CPU else (1024, 4096) if quick else (1024, 2048, 4096, 8192, 16384)
    guarded(res, "gemm", lambda: gemm_grid(sizes))
    save()
    tokens = (64,) if CPU else (2048, 4096) if quick else (1024, 2048, 4096, 8192)
    models = [("tiny", 64, 32)] if CPU else EXPERTS[:1] if quick else EXPERTS
    guarded(res, "experts", lambda: expert_grid(tokens, models))
    save()
    # What the expert GEMMs read: tokens x hidden and tokens x width (activations),
    # hidden x 2 width and width x hidden (weights).
    shapes = [(64, 64)] if CPU else [
        shape for T in tokens for _, h, f in EXPERTS for shape in ((T, h), (T, f))]
    shapes += [] if CPU else [shape for _, h, f in EXPERTS for shape in ((h, 2 * f), (f, h))]
    guarded(res, "scaling", lambda: scaling_grid(shapes))
    save()
    print(f"done in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

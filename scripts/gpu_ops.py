#!/usr/bin/env python3
"""Times a transformer layer's ops, GEMMs, attention and memory traffic on one CUDA GPU.

The measurements behind docs/presets.md's "Measured kernels" section: what the GPU's own
kernels reach (PyTorch eager, cuBLAS/cuBLASLt GEMMs, PyTorch's fused attention) at the sizes
pipesim's efficiency curves are read at, and a whole layer, op by op, in the same split as
`pipesim model --ops` (forward, backward of the input, backward of the weights).

    python3 scripts/gpu_ops.py OUT.json [--quick]

Every figure is the median of timed repetitions between CUDA events, after warm-ups. A
measurement that fails records its error and the script goes on. scripts/compare_ops.py
puts the result next to `pipesim model --ops --json` for the same shapes.
"""
import json
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DEV = "cuda"
BF16 = torch.bfloat16


def timed(fn, reps=10, warm=3):
    """Median seconds of fn() over reps runs, each between CUDA events."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def guarded(results, key, fn):
    try:
        results[key] = fn()
    except Exception as exc:  # one failed measurement must not lose the others
        results[key] = {"error": f"{type(exc).__name__}: {exc}"}
        traceback.print_exc()
    print(f"{key}: {json.dumps(results[key])[:300]}", flush=True)


def gemm_grid(sizes):
    rows = []
    for m in sizes:
        for n in sizes:
            for k in sizes:
                a = torch.randn(m, k, device=DEV, dtype=BF16)
                b = torch.randn(k, n, device=DEV, dtype=BF16)
                flops = 2.0 * m * n * k
                row = {"m": m, "n": n, "k": k, "flops": flops}
                row["bf16_s"] = timed(lambda: a @ b)
                try:
                    a8 = a.to(torch.float8_e4m3fn)
                    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major
                    one = torch.ones((), device=DEV, dtype=torch.float32)
                    row["fp8_s"] = timed(
                        lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=BF16)
                    )
                except Exception as exc:
                    row["fp8_error"] = f"{type(exc).__name__}: {exc}"
                rows.append(row)
                del a, b
    return rows


def memory_grid():
    rows = []
    for mib in (1, 4, 16, 64, 256, 1024, 4096):
        n = mib * 2**20 // 2
        x = torch.randn(n, device=DEV, dtype=BF16)
        y = torch.empty_like(x)
        z = torch.randn(n, device=DEV, dtype=BF16)
        rows.append({
            "bytes_each": 2 * n,
            "copy_s": timed(lambda: y.copy_(x)),          # reads and writes 2n bytes each
            "add_s": timed(lambda: torch.add(x, z, out=y)),  # reads 2, writes 1
        })
        del x, y, z
    return rows


def attention_grid(cases):
    rows = []
    for seq, heads, groups, dim in cases:
        q = torch.randn(1, heads, seq, dim, device=DEV, dtype=BF16, requires_grad=True)
        k = torch.randn(1, groups, seq, dim, device=DEV, dtype=BF16, requires_grad=True)
        v = torch.randn(1, groups, seq, dim, device=DEV, dtype=BF16, requires_grad=True)
        gqa = groups != heads

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

        out = fwd()
        grad = torch.randn_like(out)

        def both():
            o = fwd()
            torch.autograd.grad(o, (q, k, v), grad)

        f = timed(fwd)
        fb = timed(both)
        causal_flops = 2.0 * seq * seq * dim * heads  # 4 s^2 d a / 2: the kernel skips half
        rows.append({"seq": seq, "heads": heads, "groups": groups, "dim": dim,
                     "causal_flops": causal_flops, "forward_s": f, "backward_s": fb - f})
        del q, k, v, out, grad
    return rows


class Layer:
    """One pre-norm transformer layer on one tensor-parallel rank, as pipesim's generator
    splits it (docs/models.md): norm, qkv, rotary, attention, projection, residual add,
    norm, fc1, activation, fc2, residual add. Tensor-parallel collectives are not run."""

    def __init__(self, c):
        self.c = c
        t = c["tensor"]
        h, a, g, f = c["hidden"], c["heads"], c["groups"], c["ffn"]
        d = h // a
        self.a, self.g, self.d = a // t, max(1, g // t), d
        self.f = f // t
        self.tokens = c["micro_batch"] * c["sequence"]
        gated = c["mlp"] == "swiglu"
        w = lambda i, o: (torch.randn(i, o, device=DEV, dtype=BF16) * 0.02).requires_grad_()
        self.w_qkv = w(h, (self.a + 2 * self.g) * d)
        self.w_proj = w(self.a * d, h)
        self.w_fc1 = w(h, (2 if gated else 1) * self.f)
        self.w_fc2 = w(self.f, h)
        self.norm_w = torch.ones(h, device=DEV, dtype=BF16, requires_grad=True)
        self.norm_b = torch.zeros(h, device=DEV, dtype=BF16, requires_grad=True)
        s = c["sequence"]
        pos = torch.arange(s, device=DEV, dtype=torch.float32)[:, None]
        inv = 10000.0 ** (-torch.arange(0, d, 2, device=DEV, dtype=torch.float32) / d)
        ang = torch.cat([pos * inv, pos * inv], dim=-1)
        self.cos, self.sin = ang.cos().to(BF16), ang.sin().to(BF16)

    def norm(self, x):
        if self.c["norm"] == "rmsnorm":
            return F.rms_norm(x, (x.shape[-1],), self.norm_w)
        return F.layer_norm(x, (x.shape[-1],), self.norm_w, self.norm_b)

    def rotary(self, x):  # x: [b, heads, s, d]
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos + rot * self.sin

    def activation(self, x):
        if self.c["mlp"] == "swiglu":
            gate, up = x.chunk(2, dim=-1)
            return F.silu(gate) * up
        return F.gelu(x, approximate="tanh")

    def split_heads(self, qkv):
        b, s = self.c["micro_batch"], self.c["sequence"]
        q, k, v = qkv.split([self.a * self.d, self.g * self.d, self.g * self.d], dim=-1)
        q = q.view(b, s, self.a, self.d).transpose(1, 2)
        k = k.view(b, s, self.g, self.d).transpose(1, 2)
        v = v.view(b, s, self.g, self.d).transpose(1, 2)
        return q, k, v

    def attention(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=self.g != self.a)

    def forward(self, x):
        b, s = self.c["micro_batch"], self.c["sequence"]
        q, k, v = self.split_heads(self.norm(x) @ self.w_qkv)
        if self.c["position"] == "rotary":
            q, k = self.rotary(q), self.rotary(k)
        o = self.attention(q, k, v).transpose(1, 2).reshape(b * s, self.a * self.d)
        x = x + o @ self.w_proj
        return x + self.activation(self.norm(x) @ self.w_fc1) @ self.w_fc2

    def params(self):
        norms = [self.norm_w] + ([self.norm_b] if self.c["norm"] == "layernorm" else [])
        return [self.w_qkv, self.w_proj, self.w_fc1, self.w_fc2] + norms


def op_split(fn, inputs, weights):
    """forward, backward of the inputs, backward of the weights, each timed alone."""
    out = fn(*inputs)
    grad = torch.randn_like(out)
    fwd = timed(lambda: fn(*inputs))
    res = {"forward_s": fwd}
    if inputs:
        res["backward_input_s"] = timed(
            lambda: torch.autograd.grad(fn(*inputs), inputs, grad)) - fwd
    if weights:
        res["backward_weight_s"] = timed(
            lambda: torch.autograd.grad(fn(*inputs), weights, grad)) - fwd
    return res


def layer_ops(c):
    L = Layer(c)
    T, h = L.tokens, c["hidden"]
    x = torch.randn(T, h, device=DEV, dtype=BF16, requires_grad=True)
    hq = torch.randn(T, h, device=DEV, dtype=BF16, requires_grad=True)
    ops = {}
    ops["ln"] = op_split(L.norm, [x], [])
    ops["qkv"] = op_split(lambda a: a @ L.w_qkv, [hq], [L.w_qkv])
    qkv = (hq @ L.w_qkv).detach()
    q, k, v = [t.detach().contiguous().requires_grad_() for t in L.split_heads(qkv)]
    if c["position"] == "rotary":
        ops["rotary"] = op_split(lambda a, b: torch.cat([L.rotary(a), L.rotary(b)], 1), [q, k], [])
    ops["attention"] = op_split(L.attention, [q, k, v], [])
    o = torch.randn(T, L.a * L.d, device=DEV, dtype=BF16, requires_grad=True)
    ops["projection"] = op_split(lambda a: a @ L.w_proj, [o], [L.w_proj])
    r = torch.randn(T, h, device=DEV, dtype=BF16, requires_grad=True)
    ops["residual_add"] = op_split(lambda a, b: a + b, [x, r], [])
    ops["fc1"] = op_split(lambda a: a @ L.w_fc1, [hq], [L.w_fc1])
    u = torch.randn(T, L.w_fc1.shape[1], device=DEV, dtype=BF16, requires_grad=True)
    ops["activation"] = op_split(L.activation, [u], [])
    m = torch.randn(T, L.f, device=DEV, dtype=BF16, requires_grad=True)
    ops["fc2"] = op_split(lambda a: a @ L.w_fc2, [m], [L.w_fc2])
    whole = op_split(L.forward, [x], L.params())
    grad = torch.randn_like(L.forward(x))
    whole["forward_backward_s"] = timed(
        lambda: torch.autograd.grad(L.forward(x), [x] + L.params(), grad))
    return {"config": c, "ops": ops, "layer": whole}


LAYERS = [
    # llama3-8b on one GPU (scenarios/models/llama3-8b.yaml)
    dict(name="llama3-8b", hidden=4096, heads=32, groups=8, ffn=14336, mlp="swiglu",
         norm="rmsnorm", position="rotary", sequence=8192, micro_batch=1, tensor=1),
    # llama3-70b, one rank of tensor parallelism 8
    dict(name="llama3-70b-tp8", hidden=8192, heads=64, groups=8, ffn=28672, mlp="swiglu",
         norm="rmsnorm", position="rotary", sequence=8192, micro_batch=1, tensor=8),
    # gpt3-175b, one rank of tensor parallelism 8
    dict(name="gpt3-175b-tp8", hidden=12288, heads=96, groups=96, ffn=49152, mlp="gelu",
         norm="layernorm", position="learned", sequence=2048, micro_batch=1, tensor=8),
    # llama3.1-405b, one rank of tensor parallelism 8
    dict(name="llama3.1-405b-tp8", hidden=16384, heads=128, groups=8, ffn=53248, mlp="swiglu",
         norm="rmsnorm", position="rotary", sequence=8192, micro_batch=1, tensor=8),
]


def main():
    out = sys.argv[1]
    quick = "--quick" in sys.argv
    t0 = time.time()
    p = torch.cuda.get_device_properties(0)
    res = {"device": torch.cuda.get_device_name(0), "sms": p.multi_processor_count,
           "memory_bytes": p.total_memory, "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    torch.backends.cuda.matmul.allow_tf32 = False

    def save():
        res["elapsed_s"] = time.time() - t0
        with open(out, "w") as f:
            json.dump(res, f, indent=1)

    guarded(res, "memory", memory_grid)
    save()
    sizes = (1024, 4096) if quick else (1024, 2048, 4096, 8192, 16384)
    guarded(res, "gemm", lambda: gemm_grid(sizes))
    save()
    cases = [(2048, 12, 12, 128), (8192, 8, 1, 128), (8192, 32, 8, 128), (16384, 16, 2, 128)]
    guarded(res, "attention", lambda: attention_grid(cases[:1] if quick else cases))
    save()
    res["layers"] = {}
    for c in LAYERS[:1] if quick else LAYERS:
        guarded(res["layers"], c["name"], lambda c=c: layer_ops(c))
        torch.cuda.empty_cache()
        save()
    save()
    print(f"done in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()

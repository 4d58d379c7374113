# One pipeline device of `pipesim validate --backend torch` (backend/torch_backend.h): a
# process that runs its device's ops of a TaskGraph for real with PyTorch on the CPU, in
# its stream's order, sending and receiving activations and gradients over gloo.
#
#   python3 -c SCRIPT RANK WORLD STORE_FILE THREADS
# Reads one JSON command per line on stdin, answers one JSON line on stdout:
#   {"cmd": "run", "ops": [...]}   the device's ops in stream order (below) ->
#                                  {"start": {id: ns}, "end": {id: ns}, "peak_bytes": n}
#   {"cmd": "time", "op": {...}}   one compute op alone (a backward after an untimed forward)
#                                  -> {"ns": n}
#   {"cmd": "quit"}
# First line out: {"ready": true, "rate": FLOP/s of one matmul on this core, "torch": version}.
#
# A compute op {"id", "kind": F|B|I|W|R|O, "key": "mb.chunk", "matmuls": k, "keep": j,
# "recomputed": bool, "in": [ids], "out": [ids]}: a forward runs min(j, k) matmuls of
# [rows, hidden] by [hidden, hidden] with tanh between under autograd, keeps them (and
# zeroed tensors up to j) for the backward, and pads to k without autograd; a forward the
# schedule recomputes keeps only its input, and R runs it again under autograd; a backward
# is autograd through the kept matmuls (B = input and weight gradients, I = input gradients
# only, W = weight gradients only), the optimizer an SGD step; each pads with matmuls on
# scratch to its `matmuls` when autograd does less. "in": transfers it waits for
# (activation or gradient), "out": transfers it sends when done. Incoming transfers
# {"id", "src", "due_ns"} (ended no earlier than due_ns after the send) and outgoing
# {"id", "dst"} are listed in "recv" and "send" of the run command. Times:
# time.monotonic_ns(), one clock for every process of the host. Memory: the bytes of the
# tensors the process holds (kept activations, gradients kept for W, received tensors while
# their op runs), at its peak.
import json
import sys
import threading
import time

import torch
import torch.distributed as dist

rank, world, store, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(rank)


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Device:
    def __init__(self, rows, hidden):
        self.rows, self.hidden = rows, hidden
        self.weights = {}  # chunk -> list of [hidden, hidden] parameters
        self.kept = {}     # key -> (x, y, tensors autograd keeps)
        self.grads = {}    # key -> output gradient kept for W
        self.scratch = torch.randn(rows, hidden) * 0.01
        self.pad_w = torch.randn(hidden, hidden) * 0.01
        self.held = 0
        self.peak = 0

    def hold(self, n):
        self.held += n
        self.peak = max(self.peak, self.held)

    def bytes_of(self, tensors):
        return sum(t.numel() * t.element_size() for t in tensors)

    def params(self, chunk, k):
        w = self.weights.setdefault(chunk, [])
        while len(w) < k:
            w.append(torch.nn.Parameter(torch.randn(self.hidden, self.hidden) / self.hidden))
        return w[:k]

    def pad(self, matmuls):
        x = self.scratch
        with torch.no_grad():
            for _ in range(max(0, matmuls)):
                x = torch.tanh(x @ self.pad_w)

    def forward(self, op, x, grad_input=True):
        """min(keep, matmuls) matmuls under autograd, then padding to `matmuls`; what the op
        keeps for the backward comes to `keep` tensors (its activation bytes, scaled): the
        ones autograd keeps, and zeroed tensors beside them for the rest. A forward the
        schedule recomputes keeps only its input and runs without autograd. x: the received
        activation (None on the first stage: a fixed input)."""
        keep = max(1, op["keep"])
        j = max(1, min(keep, op["matmuls"]))
        chunk = op["key"].split(".")[1]
        if x is None:
            x = self.scratch
        else:
            x = x.detach().requires_grad_(grad_input)
        if op.get("recomputed"):
            with torch.no_grad():
                h = x
                for w in self.params(chunk, j):
                    h = torch.tanh(h @ w)
            self.kept[op["key"]] = (x,)
            self.hold(self.bytes_of([x]))
            self.pad(op["matmuls"] - j)
            return h.detach()
        h, inner = x, []
        for w in self.params(chunk, j):
            h = torch.tanh(h @ w)
            inner.append(h)
        ballast = [torch.zeros(self.rows, self.hidden) for _ in range(keep - j)]
        self.kept[op["key"]] = (x, h, inner + ballast)
        self.hold(self.bytes_of([x] + inner + ballast))
        self.pad(op["matmuls"] - j)
        return h.detach()

    def recompute(self, op):
        (x,) = self.kept.pop(op["key"])
        self.held -= self.bytes_of([x])
        self.forward(dict(op, recomputed=False), x, grad_input=x.requires_grad)

    def backward(self, op, g):
        x, y, inner = self.kept[op["key"]]
        chunk = op["key"].split(".")[1]
        k = sum(1 for t in inner if t.requires_grad)  # the matmuls autograd goes through
        if g is None:
            g = torch.ones_like(y)
        kind = op["kind"]
        gx = None
        done = 0
        if kind == "B":
            y.backward(g)
            gx = x.grad
            done = 2 * k
        elif kind == "I":
            if x.requires_grad:
                gx = torch.autograd.grad(y, x, g, retain_graph=True)[0]
            self.grads[op["key"]] = g
            self.hold(self.bytes_of([g]))
            done = k
        elif kind == "W":
            g = self.grads.pop(op["key"])
            self.held -= self.bytes_of([g])
            grads = torch.autograd.grad(y, self.params(chunk, k), g)
            for w, gw in zip(self.params(chunk, k), grads):
                w.grad = gw if w.grad is None else w.grad + gw
            done = k
        self.pad(op["matmuls"] - done)
        if kind in ("B", "W"):
            del self.kept[op["key"]]
            self.held -= self.bytes_of([x] + inner)
        return None if gx is None else gx.detach()

    def compute(self, op, inputs):
        kind = op["kind"]
        if kind == "F":
            return self.forward(op, inputs[0] if inputs else None)
        if kind in ("B", "I", "W"):
            return self.backward(op, inputs[0] if inputs else None)
        if kind == "R":
            self.recompute(op)
            return None
        with torch.no_grad():  # optimizer: SGD on every parameter, then padding
            for ws in self.weights.values():
                for w in ws:
                    if w.grad is not None:
                        w -= 1e-3 * w.grad
                        w.grad = None
        self.pad(op["matmuls"])
        return None


def run(dev, cmd):
    ops, recv, send = cmd["ops"], cmd["recv"], cmd["send"]
    start, end = {}, {}
    shape = (dev.rows, dev.hidden)
    buffers, works, arrived = {}, [], {}
    for r in recv:  # every receive posted up front, in the order the ops use them
        tid = r["id"]
        buffers[tid] = torch.empty(shape)
        sent_at = torch.zeros(1, dtype=torch.int64)
        works.append((tid, dist.irecv(buffers[tid], src=r["src"], tag=2 * tid),
                      dist.irecv(sent_at, src=r["src"], tag=2 * tid + 1), sent_at, r["due_ns"]))
        arrived[tid] = threading.Event()
    dest = {s["id"]: s["dst"] for s in send}

    def receiver():  # a transfer ends at its idle-path time after it was sent, or on arrival
        for tid, data, stamp, sent_at, due_ns in works:
            data.wait()
            stamp.wait()
            wait = int(sent_at[0]) + int(due_ns) - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait * 1e-9)
            end[str(tid)] = time.monotonic_ns()
            arrived[tid].set()

    dist.barrier()
    listener = threading.Thread(target=receiver)
    listener.start()
    sends = []
    for op in ops:
        inputs = []
        for tid in op["in"]:
            arrived[tid].wait()
            inputs.append(buffers.pop(tid))
        for t in inputs:
            dev.hold(t.numel() * t.element_size())
        start[str(op["id"])] = time.monotonic_ns()
        out = dev.compute(op, inputs)
        end[str(op["id"])] = time.monotonic_ns()
        for t in inputs:
            dev.held -= t.numel() * t.element_size()
        for tid in op["out"]:
            payload = out if out is not None else torch.zeros(shape)
            now = time.monotonic_ns()
            start[str(tid)] = now
            sends.append(dist.isend(payload.contiguous(), dst=dest[tid], tag=2 * tid))
            sends.append(dist.isend(torch.tensor([now], dtype=torch.int64), dst=dest[tid],
                                    tag=2 * tid + 1))
    for w in sends:
        w.wait()
    listener.join()
    dist.barrier()
    return {"start": start, "end": end, "peak_bytes": dev.peak}


def time_alone(dev, op):
    """One op alone, after what it needs (untimed): a forward before a backward, its input
    half before a W, a forward that keeps only its input before a recompute."""
    kind = op["kind"]
    before = {"key": op["key"], "matmuls": 0, "keep": op["keep"]}
    if kind in ("B", "I", "W"):
        dev.forward(before, None)
    if kind == "W":
        dev.backward(dict(before, kind="I"), None)
    if kind == "R":
        dev.forward(dict(before, recomputed=True), None)
    t0 = time.monotonic_ns()
    dev.compute(op, [])
    t1 = time.monotonic_ns()
    dev.kept.clear()
    dev.grads.clear()
    dev.held = 0
    return t1 - t0


def calibrate(rows, hidden):
    a, w = torch.randn(rows, hidden), torch.randn(hidden, hidden) / hidden
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        torch.tanh(a @ w)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * rows * hidden * hidden / best


def main():
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    setup = json.loads(sys.stdin.readline())
    dev = Device(setup["rows"], setup["hidden"])
    say({"ready": True, "rate": calibrate(dev.rows, dev.hidden), "torch": torch.__version__})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            break
        if cmd["cmd"] == "run":
            dev.peak = dev.held = 0
            say(run(dev, cmd))
        elif cmd["cmd"] == "time":
            say({"ns": time_alone(dev, cmd["op"])})
    dist.destroy_process_group()


main()

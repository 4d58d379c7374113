"""torchtitan's published runs (PyTorch-native: FSDP2, tensor, pipeline and context
parallelism, torch.compile, torchao's float8 linears), held out: added after every fit here
was chosen, used by none.

Sources (pytorch/torchtitan @ b5bcd76c; the rows and the comparison are in
docs/validation.md, "torchtitan's Llama 3.1 runs, out of sample"):
- benchmarks/llama3_h100_202412_torchtitan.md (torch 1963fc8, torchtitan 9dec370, 2024-12);
- benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (torch 38410cf9, 2025-06);
- benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (torchtitan e7c0cae, 2025-06).

The first two ran on Grand Teton hosts: 8 H100s a server, each with 96 GB of HBM2e at 2.4 TB/s, NVLink
inside, 400 Gbit/s RDMA a GPU, and a 500 W power limit the sources say lowers the peak to
somewhere "between SXM and NVL". The rows give the GPU that memory, that bandwidth and the
limit (`gpu_fields`: `power_limit: 500 W`, docs/presets.md "Power limits"). The H200 runs
are standard HGX H200s.

What the runs set, from torchtitan @ 9dec370 (train_configs/llama3_{8b,70b,405b}.toml,
torchtitan/config_manager.py, torchtitan/parallelisms/):
- FSDP2 with bf16 parameters for compute over sharded fp32 weights and fp32 reductions
  (mixed_precision_param bfloat16, mixed_precision_reduce float32): `zero: 3`,
  `gradients: fp32`, AdamW with fp32 moments;
- float8: torchao's dynamically scaled (tensorwise) float8 linears, weights gathered in
  float8 (enable_fsdp_float8_all_gather, set in the 405B preset and in the H200 command):
  `precision: fp8`, `fp8_params: true`;
- with pipeline parallelism FSDP keeps the gathered weights for the whole step
  (reshard_after_forward = False) and reduces the gradients at the last micro-batch: one
  gather and one reduction a step, `zero: 1` with the gather beside the first forward;
  micro-batches default to the pipeline degree (pipeline_parallel_microbatches);
  interleaved runs two chunks a GPU (generate_split_points);
- context parallelism: PyTorch's ring attention with its all-gather rotation
  (context_parallel_rotate_method "allgather");
- "AsyncTP": the tensor-parallel collectives beside the GEMMs (`tensor_overlap: full`);
  vanilla tensor parallelism none (`none`); sequence parallelism on the norms;
- activation checkpointing "full" is pipesim's `full`. "selective" with
  selective_ac_option "op" (the 8B presets) saves the outputs of the ops in its save list
  (aten.mm, the SDPA kernels, max) but every second mm, and re-runs the rest:
  `recompute: selective` with `recompute_modules: [alternate_gemms]`. Under float8 too:
  torchao's float8 linears call aten.mm on their float8 tensors, which the checkpointing
  policy (a dispatch mode, which sees an op before a tensor subclass does) counts as it
  counts a 16-bit one.
The eager (uncompiled) 8B rows are left out: pipesim prices the fused kernels a compiler or
Transformer Engine runs, not PyTorch's eager element-wise ops. So are the June 2025
float8 rowwise rows, whose vanilla TP figure the source calls a known performance bug
(torchtitan issue 1207).
"""

from h100_rows import LLAMA3_8B, LLAMA3_70B, LLAMA31_405B

TITAN_2412 = ("torchtitan, Llama 3.1 on 8-512 H100s (pytorch/torchtitan "
              "benchmarks/llama3_h100_202412_torchtitan.md @ b5bcd76c)")
TITAN_2506 = ("torchtitan, async TP on 64-256 H100s (pytorch/torchtitan "
              "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md @ b5bcd76c)")
TITAN_H200 = ("torchtitan, Llama 3.1 8B on 32-64 H200s (pytorch/torchtitan "
              "benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @ b5bcd76c)")
GRAND_TETON = {"memory": "96 GiB", "hbm_bandwidth": "2.4 TB/s", "power_limit": "500 W"}


OP_SAC = dict(recompute="selective", recompute_modules=["alternate_gemms"])


def titan(name, source, model, seq, gpus, local_batch, precision, measured, tp=1, pp=1, vp=1,
          cp=1, recompute="full", async_tp=False, gpu="h100-80gb", **extra):
    """One torchtitan run: `local_batch` sequences per data-parallel rank, split into `pp`
    micro-batches under pipeline parallelism, one micro-batch otherwise."""
    dp = gpus // (tp * pp * cp)
    row = dict(name=name, source=source, model=model, seq=seq, gpus=gpus, gbs=local_batch * dp,
               mbs=local_batch // pp, tp=tp, pp=pp, vp=vp, precision=precision,
               measured=measured, note="", framework="fsdp", gpu=gpu,
               zero=1 if pp > 1 else 3, gradients="fp32", recompute=recompute,
               held_out="torchtitan", rows_file="scripts/torchtitan_rows.py")
    if gpu == "h100-80gb":
        row["gpu_fields"] = GRAND_TETON
    if pp > 1:
        row["overlap_param_gather"] = True
    if cp > 1:
        row.update(cp=cp, context_comm="all-gather")
    if tp > 1:
        row["tensor_overlap"] = "full" if async_tp else "none"
    if precision == "fp8":
        row["fp8_params"] = True
    row.update(extra)
    return row


ROWS = []
# Table 1 and 3: Llama 3.1 8B, FSDP, local batch 2, per-op selective checkpointing; eager
# runs left out (above).
for gpus, compiled, float8 in ((8, 6667, 8532), (128, 6514, 8380)):
    ROWS += [titan(f"titan-llama3.1-8b-{gpus}gpu-bf16", TITAN_2412, LLAMA3_8B, 8192, gpus, 2,
                   "bf16", compiled, **OP_SAC),
             titan(f"titan-llama3.1-8b-{gpus}gpu-fp8", TITAN_2412, LLAMA3_8B, 8192, gpus, 2,
                   "fp8", float8, **OP_SAC)]
# Table 2: 8B on 8 GPUs, FSDP x CP, local batch 1, full checkpointing, float8.
for cp, seq, measured in ((1, 32768, 3890), (2, 65536, 2540), (4, 131072, 1071),
                          (8, 262144, 548)):
    ROWS.append(titan(f"titan-llama3.1-8b-{seq // 1024}k-cp{cp}-fp8", TITAN_2412, LLAMA3_8B,
                      seq, 8, 1, "fp8", measured, cp=cp))
# Table 4: 70B on 256 GPUs, FSDP 32 x TP 8, local batch 16, full checkpointing, float8.
for async_tp, measured in ((False, 829), (True, 876)):
    ROWS.append(titan(f"titan-llama3.1-70b-tp8{'-async' if async_tp else ''}-fp8", TITAN_2412,
                      LLAMA3_70B, 8192, 256, 16, "fp8", measured, tp=8, async_tp=async_tp))
# Table 5: 405B on 512 GPUs, FSDP 8 x TP 8 x PP 8, local batch 32 (8 micro-batches of 4),
# float8, async TP, full checkpointing; 1F1B and interleaved (two chunks a GPU).
for vp, measured in ((1, 100), (2, 128)):
    ROWS.append(titan(f"titan-llama3.1-405b-pp8{'-vp2' if vp > 1 else ''}-fp8", TITAN_2412,
                      LLAMA31_405B, 8192, 512, 32, "fp8", measured, tp=8, pp=8, vp=vp,
                      async_tp=True, slow=True))
# Table 6: 405B on 512 GPUs, TP 8 x PP 8 x FSDP x CP, local batch 8, 1F1B, float8, async TP.
for cp, seq, measured in ((1, 32768, 76), (2, 65536, 47), (4, 131072, 31), (8, 262144, 16)):
    ROWS.append(titan(f"titan-llama3.1-405b-{seq // 1024}k-cp{cp}-fp8", TITAN_2412,
                      LLAMA31_405B, seq, 512, 8, "fp8", measured, tp=8, pp=8, cp=cp,
                      async_tp=True, slow=True))
# June 2025, async TP against vanilla TP: 70B on 256 GPUs (FSDP 32 x TP 8, full
# checkpointing, local batch 16) and 8B on 64 (FSDP 8 x TP 8, per-op checkpointing, local
# batch 12); bf16 and float8 tensorwise.
for precision, vanilla, asynchronous in (("bf16", 597.3, 652.4), ("fp8", 809.8, 942.4)):
    for async_tp, measured in ((False, vanilla), (True, asynchronous)):
        ROWS.append(titan(f"titan2506-llama3.1-70b-tp8{'-async' if async_tp else ''}-{precision}",
                          TITAN_2506, LLAMA3_70B, 8192, 256, 16, precision, measured, tp=8,
                          async_tp=async_tp))
for precision, vanilla, asynchronous in (("bf16", 4378, 4809.4), ("fp8", 5078.1, 5570.1)):
    for async_tp, measured in ((False, vanilla), (True, asynchronous)):
        ROWS.append(titan(f"titan2506-llama3.1-8b-tp8{'-async' if async_tp else ''}-{precision}",
                          TITAN_2506, LLAMA3_8B, 8192, 64, 12, precision, measured, tp=8,
                          async_tp=async_tp, **OP_SAC))
# H200: 8B on 32 and 64 GPUs, FSDP, local batch 2, compiled, float8 with float8 gathers,
# per-op checkpointing (the preset's at e7c0cae).
for gpus, measured in ((32, 10938), (64, 10753)):
    ROWS.append(titan(f"titan-h200-llama3.1-8b-{gpus}gpu-fp8", TITAN_H200, LLAMA3_8B, 8192, gpus,
                      2, "fp8", measured, gpu="h200", **OP_SAC))

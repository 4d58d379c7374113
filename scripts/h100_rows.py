"""Published, measured H100 (and paired A100) training runs that pipesim can express.

Each row is one configuration as its source published it (docs/validation/h100-published.md
gives every source's table verbatim, with repository, path and commit). `measured` is
tokens per second per GPU: read directly where the source prints it, otherwise converted
from what it prints (step time, or model TFLOP/s with the source's own FLOP formula) as
the row's comment says. scripts/h100_fit.py writes one scenario per row under
scenarios/validation/ and compares pipesim with `measured`.
"""

# Model shapes (the models' public configurations; docs/validation/h100-published.md §0).
GPT3_5B = dict(layers=24, hidden=4096, heads=32, ffn=16384, vocab=50304)
GPT3_20B = dict(layers=44, hidden=6144, heads=48, ffn=24576, vocab=50304)
GPT3_175B = dict(layers=96, hidden=12288, heads=96, ffn=49152, vocab=50304)
LLAMA2 = dict(mlp="swiglu", norm="rmsnorm", position="rotary", vocab=32000, tie_embeddings=False)
LLAMA2_7B = dict(LLAMA2, layers=32, hidden=4096, heads=32, ffn=11008)
LLAMA2_13B = dict(LLAMA2, layers=40, hidden=5120, heads=40, ffn=13824)
LLAMA2_70B = dict(LLAMA2, layers=80, hidden=8192, heads=64, query_groups=8, ffn=28672)
# Nemotron's squared-ReLU MLP is a plain (ungated) two-GEMM MLP: `gelu` has its GEMMs.
NEMOTRON = dict(position="rotary", vocab=256000, tie_embeddings=False)
NEMOTRON_8B = dict(NEMOTRON, layers=32, hidden=4096, heads=32, ffn=16384)
NEMOTRON4_15B = dict(NEMOTRON, layers=32, hidden=6144, heads=48, query_groups=8, ffn=24576)
NEMOTRON4_340B = dict(NEMOTRON, layers=96, hidden=18432, heads=96, query_groups=8, ffn=73728)
# MPT as llm-foundry benchmarks it (scripts/train/yamls/pretrain/mpt-*.yaml with the
# defaults of llmfoundry/models/mpt/configuration_mpt.py): learned positions, LayerNorm,
# GeLU, ffn 4h, tied embeddings, vocabulary 50368.
MPT = dict(vocab=50368)
MPT_SIZES = {
    "760m": dict(MPT, layers=24, hidden=1536, heads=12, ffn=6144),
    "1b": dict(MPT, layers=24, hidden=2048, heads=16, ffn=8192),
    "3b": dict(MPT, layers=32, hidden=2560, heads=20, ffn=10240),
    "7b": dict(MPT, layers=32, hidden=4096, heads=32, ffn=16384),
    "13b": dict(MPT, layers=40, hidden=5120, heads=40, ffn=20480),
    "30b": dict(MPT, layers=48, hidden=7168, heads=56, ffn=28672),
    "70b": dict(MPT, layers=80, hidden=8192, heads=64, ffn=32768),
}


def megatron_flops_per_token(m, seq):
    """Megatron-LM's num_floating_point_operations (megatron/training/training.py) per token:
    12 L h^2 ((1 + g/a + s/h) + (f/h) x (3/2 if gated) + V / (2 L h))."""
    L, h = m["layers"], m["hidden"]
    g = m.get("query_groups", m["heads"]) / m["heads"]
    gated = 1.5 if m.get("mlp") in ("swiglu", "geglu") else 1.0
    return 12 * L * h * h * ((1 + g + seq / h) + m["ffn"] / h * gated + m["vocab"] / (2 * L * h))


def nemo(name, source, model, seq, gpus, gbs, mbs, tp, pp, vp, precision, measured, note="",
         recompute="none", gradients="weights", tensor_overlap="full"):
    """A Megatron-Core run (NeMo's recipes: distributed optimizer with its weight gather
    beside the next forward (overlap_param_sync, --overlap-param-gather), gradients reduced
    in bf16 (grad_sync_dtype), sequence parallelism with tensor parallelism, and the
    tensor-parallel collectives beside the GEMMs (tp_comm_overlap; docs/validation.md,
    "Tensor-parallel overlap as the recipes set it"), `backward` where a recipe is not
    checked)."""
    return dict(name=name, source=source, model=model, seq=seq, gpus=gpus, gbs=gbs, mbs=mbs,
                tp=tp, pp=pp, vp=vp, precision=precision, measured=measured, note=note,
                framework="megatron", gpu="h100-80gb", recompute=recompute, zero=1,
                gradients=gradients, tensor_overlap=tensor_overlap)


ROWS = []

# NVIDIA/NeMo docs/source/performance/performance_summary.md @ 8e3d65dc (NeMo 24.07,
# DGX-H100, FP8): tokens/s/GPU as printed. Rows with context parallelism wait for it.
NEMO = "NeMo 24.07 performance summary (NVIDIA/NeMo docs/source/performance/performance_summary.md @ 8e3d65dc)"
ROWS += [
    nemo("nemo-gpt3-5b-fp8", NEMO, GPT3_5B, 2048, 64, 2048, 4, 1, 1, 1, "fp8", 23406),
    nemo("nemo-gpt3-20b-fp8", NEMO, GPT3_20B, 2048, 64, 256, 2, 2, 1, 1, "fp8", 5851),
    nemo("nemo-gpt3-175b-fp8", NEMO, GPT3_175B, 2048, 128, 256, 1, 4, 8, 6, "fp8", 716),
    nemo("nemo-llama2-7b-fp8", NEMO, LLAMA2_7B, 4096, 8, 128, 1, 1, 1, 1, "fp8", 16934),
    nemo("nemo-llama2-13b-fp8", NEMO, LLAMA2_13B, 4096, 16, 128, 1, 1, 4, 10, "fp8", 8715),
    nemo("nemo-llama2-70b-fp8", NEMO, LLAMA2_70B, 4096, 64, 128, 1, 4, 4, 20, "fp8", 1728),
    nemo("nemo-nemotron-8b-fp8", NEMO, NEMOTRON_8B, 4096, 64, 256, 4, 2, 1, 1, "fp8", 12507),
    nemo("nemo-nemotron4-340b-fp8", NEMO, NEMOTRON4_340B, 4096, 128, 32, 1, 8, 8, 12, "fp8", 326,
         recompute="selective"),
]

# NVIDIA/dgxc-benchmarking @ 1b9bb6b3 (NeMo 24.12 container, DGX-H100), BF16 and FP8 of
# the same layout: tokens/s/GPU = seq x GBS / step time / GPUs (the smallest scale of each
# table; the larger scales are within 1-4 % per GPU). Layouts from the recipes at that
# commit (GPT-3: gpt3_175b_hydra.yaml, virtual pipeline 6; Nemotron-4 340B: selective
# recompute).
DGXC = "dgxc-benchmarking (NVIDIA/dgxc-benchmarking {} @ 1b9bb6b3)"
for prec, t175, t15, t340 in (("bf16", 8.309, 2.812, 4.61), ("fp8", 5.626, 2.039, 3.16)):
    ROWS += [
        nemo(f"dgxc-gpt3-175b-{prec}", DGXC.format("nemo_megatron/README_175b.md"), GPT3_175B,
             2048, 128, 256, 1, 4, 8, 6, prec, 2048 * 256 / t175 / 128, f"step {t175} s"),
        nemo(f"dgxc-nemotron4-15b-{prec}", DGXC.format("nemotron/README_15b.md"),
             NEMOTRON4_15B, 4096, 16, 64, 4, 4, 1, 1, prec, 4096 * 64 / t15 / 16,
             f"step {t15} s"),
        nemo(f"dgxc-nemotron4-340b-{prec}", DGXC.format("nemotron/README_340b.md"),
             NEMOTRON4_340B, 4096, 128, 32, 1, 8, 8, 12, prec, 4096 * 32 / t340 / 128,
             f"step {t340} s", recompute="selective"),
    ]

# NVIDIA/Megatron-LM README.md, "Training Speed and Scalability" @ f2e5db40 (Megatron-Core
# r0.8.0, H100, BF16, seq 4096, vocab 131072, DP 48, global batch 192): rows without a
# pipeline (the pipelined rows' virtual stages are not published). Per-GPU TFLOP/s as
# printed, turned into tokens/s with Megatron-LM's own FLOP count. The micro-batch is not
# published: a throughput benchmark without a pipeline runs the largest one that fits,
# here the whole 192 / 48 = 4 sequences of each data-parallel rank in one micro-batch
# (pipesim peaks at 18-46 GiB of the 80; with micro-batch 1 the fp32 gradient
# reduce-scatter, 16 GB per GPU at TP 8 over one port, has one micro-batch's backward
# to hide behind instead of the whole step's).
MLM = "Megatron-LM README H100 table (NVIDIA/Megatron-LM README.md @ f2e5db40)"
for size, heads, hidden, layers, tp, tflops in (("1.7b", 16, 2048, 24, 1, 408.8),
                                               ("7.1b", 32, 4096, 30, 2, 465.9),
                                               ("16b", 48, 6144, 32, 4, 489.1),
                                               ("32b", 56, 7168, 48, 8, 459.6)):
    m = dict(layers=layers, hidden=hidden, heads=heads, ffn=4 * hidden, vocab=131072)
    ROWS.append(nemo(f"megatron-h100-{size}-bf16", MLM, m, 4096, 48 * tp, 192, 4, tp, 1, 1,
                     "bf16", tflops * 1e12 / megatron_flops_per_token(m, 4096),
                     f"{tflops} TFLOP/s/GPU", gradients="fp32"))

# mosaicml/llm-foundry scripts/train/benchmarking/README.md @ b2a43a14: MPT on 8-64 GPUs,
# Composer FSDP (FULL_SHARD), flash attention, amp_bf16, paired H100 / A100-80GB rows of
# the same configuration; tokens/s/GPU as printed. Attention is the Triton kernel
# (scripts/train/yamls/pretrain/mpt-*.yaml: attn_impl: triton). Every row of these two
# tables says FULL_SHARD (ZeRO-3; the large-scale table below runs 1B and 3B as
# SHARD_GRAD_OP); gradients reduced in fp32 (Composer's DEFAULT).
FOUNDRY = "llm-foundry benchmarks (mosaicml/llm-foundry scripts/train/benchmarking/README.md @ b2a43a14)"
# Every bf16 H100 row of the tables (amp_bf16; the fp8 rows use Transformer Engine's fp8
# layers, not expressed here), with the A100-80GB row of the same configuration where the
# A100 table has one (its 70B rows run bf16 PURE: parameters kept in bf16). Columns: model,
# sequence, GPUs, micro-batch, gradient accumulation, activation checkpointing, H100 and
# A100 tokens/s/GPU. Rows over 8 GPUs: eight 400 Gbit/s ports per H100 node, eight 200
# Gbit/s RoCE ports per A100 node ("1600 Gbps node-node").
FOUNDRY_RUNS = (
    ("70b", 2048, 64, 8, 4, True, 1039, 410), ("70b", 2048, 32, 2, 16, True, 882, 373),
    ("30b", 8192, 8, 1, 21, True, 1384, 574), ("30b", 4096, 8, 1, 21, True, 1802, 814),
    ("30b", 2048, 32, 14, 3, True, 2308, None), ("30b", 2048, 16, 10, 3, True, 2263, None),
    ("30b", 2048, 8, 3, 21, True, 2002, 916), ("30b", 1024, 8, 6, 21, True, 2084, 946),
    ("13b", 32768, 8, 1, 3, True, 1976, 1016), ("13b", 16384, 8, 3, 3, True, 2985, 1431),
    ("13b", 4096, 8, 10, 3, True, 4717, 2060), ("13b", 2048, 64, 2, 1, False, 4800, None),
    ("13b", 2048, 32, 2, 1, False, 4811, None), ("13b", 2048, 16, 2, 1, False, 4767, None),
    ("13b", 2048, 8, 2, 1, False, 4792, None), ("13b", 1024, 8, 40, 3, True, 5502, 2330),
    ("7b", 65536, 8, 1, 2, True, 1956, 1013), ("7b", 32768, 8, 2, 2, True, 3318, 1672),
    ("7b", 8192, 8, 8, 2, True, 6935, 3206), ("7b", 4096, 8, 16, 2, True, 8611, 3684),
    ("7b", 2048, 8, 6, 1, False, 10643, None), ("7b", 1024, 8, 64, 2, True, 10203, 4357),
    ("3b", 65536, 8, 1, 2, True, 3262, 1767), ("3b", 32768, 8, 3, 6, True, 5873, 3029),
    ("3b", 16384, 8, 1, 6, False, 11152, 5529), ("3b", 8192, 8, 3, 6, False, 16578, 7695),
    ("3b", 4096, 8, 5, 6, False, 20964, 9457), ("3b", 2048, 64, 6, 3, False, 22525, None),
    ("3b", 2048, 32, 6, 3, False, 23021, None), ("3b", 2048, 16, 10, 3, False, 24142, None),
    ("3b", 1024, 8, 20, 6, False, 27046, 11580), ("3b", 512, 8, 40, 6, False, 27965, 12127),
    ("1b", 65536, 8, 1, 2, True, 5506, 3044), ("1b", 32768, 8, 1, 4, False, 12025, 6275),
    ("1b", 16384, 8, 2, 4, False, 19649, 9956), ("1b", 8192, 8, 3, 4, False, 29157, 13814),
    ("1b", 4096, 8, 7, 4, False, 38535, 17807), ("1b", 2048, 64, 20, 1, False, 44402, None),
    ("1b", 2048, 32, 20, 1, False, 45130, None), ("1b", 2048, 16, 20, 1, False, 46037, None),
    ("1b", 2048, 8, 14, 1, False, 45455, None), ("1b", 1024, 8, 18, 4, False, 48910, 22112),
    ("1b", 512, 8, 56, 4, False, 52275, 23148), ("760m", 32768, 8, 1, 2, False, 16291, 8802),
    ("760m", 16384, 8, 3, 2, False, 27815, 14274), ("760m", 8192, 8, 6, 2, False, 41825, 20933),
    ("760m", 4096, 8, 12, 2, False, 55459, 27351), ("760m", 2048, 32, 24, 1, False, 67971, None),
    ("760m", 2048, 16, 24, 1, False, 68551, None), ("760m", 2048, 8, 24, 2, False, 63147, 32434),
    ("760m", 1024, 8, 48, 2, False, 78581, 29765), ("760m", 512, 8, 96, 2, False, 83749, 29446))
for size, seq, gpus, mbs, ga, ac, h100, a100 in FOUNDRY_RUNS:
    tag_seq = f"{seq // 1024}k" if seq >= 1024 else str(seq)
    scale = "" if gpus == 8 or (size, gpus) == ("70b", 64) else f"-{gpus}gpu"
    for gpu, measured in (("h100-80gb", h100), ("a100-80gb", a100)):
        if measured is None:
            continue
        tag = "h100" if gpu.startswith("h100") else "a100"
        ROWS.append(dict(name=f"foundry-mpt-{size}-{tag_seq}{scale}-{tag}", source=FOUNDRY,
                         model=MPT_SIZES[size], seq=seq, gpus=gpus, gbs=mbs * ga * gpus,
                         mbs=mbs, tp=1, pp=1, vp=1, precision="bf16", measured=measured,
                         recompute="full" if ac else "none", framework="fsdp", gpu=gpu,
                         zero=3, note="", attention_kernel="triton",
                         # Composer's DEFAULT reduces in fp32; PURE (A100's 70B) in bf16.
                         gradients="weights" if (tag, size) == ("a100", "70b") else "fp32"))

# The same README's other two tables, added after every fit here was chosen and used by none
# (held out, below): the A100-40GB table (bf16 PURE: FSDP's MixedPrecision with bf16
# parameters, reductions and buffers, the optimizer stepping the sharded fp32 weights, so
# only the reduction differs from DEFAULT: `gradients: weights`), and the H100 FP8
# table (amp_fp8: submit_benchmarks.py @ b2a43a14 sets fc_type: te, Transformer Engine
# v0.10's fp8 linear layers, with the Triton attention kernel). 125M and 350M are the
# README's two smallest models (scripts/train/yamls/pretrain/mpt-125m.yaml, mpt-350m.yaml).
MPT_SIZES["125m"] = dict(MPT, layers=12, hidden=768, heads=12, ffn=3072)
MPT_SIZES["350m"] = dict(MPT, layers=24, hidden=1024, heads=16, ffn=4096)
# Columns: model, sequence, GPUs, micro-batch, gradient accumulation, activation
# checkpointing, tokens/s/GPU.
FOUNDRY_A100_40GB = (
    ("70b", 2048, 128, 4, 1, True, 376), ("70b", 2048, 64, 2, 1, True, 276),
    ("30b", 2048, 128, 6, 1, True, 865), ("30b", 2048, 32, 4, 1, True, 857),
    ("13b", 8192, 8, 1, 16, True, 1407), ("13b", 4096, 8, 2, 16, True, 1603),
    ("13b", 2048, 128, 16, 1, True, 1972), ("13b", 2048, 64, 16, 1, True, 1976),
    ("13b", 2048, 32, 14, 1, True, 1998), ("13b", 2048, 16, 10, 1, True, 1993),
    ("13b", 2048, 8, 4, 16, True, 1668), ("13b", 1024, 8, 8, 16, True, 1727),
    ("13b", 512, 8, 16, 16, True, 1763), ("7b", 16384, 8, 1, 4, True, 2249),
    ("7b", 8192, 8, 3, 4, True, 2887), ("7b", 4096, 8, 6, 4, True, 3366),
    ("7b", 2048, 128, 18, 1, True, 3623), ("7b", 2048, 64, 18, 1, True, 3665),
    ("7b", 2048, 32, 18, 1, True, 3725), ("7b", 2048, 16, 16, 1, True, 3645),
    ("7b", 2048, 8, 12, 4, True, 3679), ("7b", 1024, 8, 24, 4, True, 3854),
    ("7b", 512, 8, 48, 4, True, 3895), ("3b", 32768, 8, 1, 4, True, 2955),
    ("3b", 16384, 8, 2, 8, True, 4465), ("3b", 8192, 8, 1, 8, False, 7149),
    ("3b", 4096, 8, 2, 8, False, 8777), ("3b", 2048, 128, 6, 1, False, 9538),
    ("3b", 2048, 64, 6, 1, False, 9736), ("3b", 2048, 32, 6, 1, False, 9914),
    ("3b", 2048, 16, 5, 1, False, 9750), ("3b", 2048, 8, 5, 8, False, 10065),
    ("3b", 1024, 8, 10, 8, False, 10731), ("3b", 512, 8, 20, 8, False, 11324),
    ("1b", 32768, 8, 1, 4, True, 5095), ("1b", 16384, 8, 1, 8, False, 9715),
    ("1b", 8192, 8, 2, 8, False, 13474), ("1b", 4096, 8, 4, 8, False, 16856),
    ("1b", 2048, 128, 10, 1, False, 18647), ("1b", 2048, 64, 10, 1, False, 19001),
    ("1b", 2048, 32, 10, 1, False, 15555), ("1b", 2048, 16, 8, 1, False, 19085),
    ("1b", 2048, 8, 8, 8, False, 19271), ("1b", 1024, 8, 16, 8, False, 20959),
    ("1b", 512, 8, 32, 8, False, 21782), ("760m", 32768, 8, 1, 4, True, 7183),
    ("760m", 16384, 8, 1, 4, False, 13914), ("760m", 8192, 8, 3, 4, False, 20106),
    ("760m", 4096, 8, 6, 4, False, 25863), ("760m", 2048, 128, 12, 1, False, 28940),
    ("760m", 2048, 64, 12, 1, False, 29344), ("760m", 2048, 32, 12, 1, False, 29648),
    ("760m", 2048, 16, 12, 1, False, 29607), ("760m", 2048, 8, 12, 4, False, 30173),
    ("760m", 1024, 8, 24, 4, False, 33422), ("760m", 512, 8, 48, 4, False, 34938),
    ("350m", 32768, 8, 1, 4, False, 13416), ("350m", 16384, 8, 2, 4, False, 22896),
    ("350m", 8192, 8, 4, 4, False, 34933), ("350m", 4096, 8, 8, 4, False, 46833),
    ("350m", 2048, 128, 18, 1, False, 51934), ("350m", 2048, 64, 18, 1, False, 52689),
    ("350m", 2048, 32, 18, 1, False, 53811), ("350m", 2048, 16, 18, 1, False, 55413),
    ("350m", 2048, 8, 16, 4, False, 55995), ("350m", 1024, 8, 32, 4, False, 62523),
    ("350m", 512, 8, 64, 4, False, 66284), ("125m", 32768, 8, 1, 4, False, 32651),
    ("125m", 16384, 8, 2, 3, False, 55484), ("125m", 8192, 8, 5, 3, False, 86858),
    ("125m", 4096, 8, 13, 3, False, 115162), ("125m", 2048, 128, 26, 1, False, 123936),
    ("125m", 2048, 64, 26, 1, False, 125234), ("125m", 2048, 32, 26, 1, False, 127122),
    ("125m", 2048, 16, 26, 1, False, 130535), ("125m", 2048, 8, 26, 3, False, 136334),
    ("125m", 1024, 8, 52, 3, False, 148289), ("125m", 512, 8, 104, 3, False, 156735))
FOUNDRY_H100_FP8 = (
    ("3b", 32768, 8, 3, 6, True, 5856), ("3b", 8192, 8, 3, 6, False, 19146),
    ("3b", 2048, 8, 10, 6, False, 30586), ("3b", 512, 8, 40, 6, False, 36527),
    ("1b", 32768, 8, 1, 4, False, 12580), ("1b", 8192, 8, 2, 4, False, 32010),
    ("1b", 512, 8, 56, 4, False, 70315))
for runs, gpu, tag, precision, gradients in (
        (FOUNDRY_A100_40GB, "a100-40gb", "a100-40gb", "bf16", "weights"),
        (FOUNDRY_H100_FP8, "h100-80gb", "h100-fp8", "fp8", "fp32")):
    for size, seq, gpus, mbs, ga, ac, measured in runs:
        tag_seq = f"{seq // 1024}k" if seq >= 1024 else str(seq)
        scale = "" if gpus == 8 else f"-{gpus}gpu"
        ROWS.append(dict(name=f"foundry-mpt-{size}-{tag_seq}{scale}-{tag}", source=FOUNDRY,
                         model=MPT_SIZES[size], seq=seq, gpus=gpus, gbs=mbs * ga * gpus,
                         mbs=mbs, tp=1, pp=1, vp=1, precision=precision, measured=measured,
                         recompute="full" if ac else "none", framework="fsdp", gpu=gpu, zero=3,
                         note="", attention_kernel="triton", gradients=gradients,
                         held_out=f"llm-foundry {tag}"))

# Blackwell rows pipesim can express (no context parallelism), fp8 (Transformer Engine's
# current scaling), tokens/s/GPU as printed. NeMo 25.02's performance summary
# (docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html,
# DGX-B200) and NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 4ab94dfa
# (25.09 and 25.11, DGX-B200 and GB200 NVL72). GB200 racks: 64 GPUs of one NVLink domain
# per rack, one 400 Gbit/s port per GPU.
LLAMA3 = dict(mlp="swiglu", norm="rmsnorm", position="rotary", vocab=128256, tie_embeddings=False,
              query_groups=8)
LLAMA3_8B = dict(LLAMA3, layers=32, hidden=4096, heads=32, ffn=14336)
LLAMA3_70B = dict(LLAMA3, layers=80, hidden=8192, heads=64, ffn=28672)
LLAMA31_405B = dict(LLAMA3, layers=126, hidden=16384, heads=128, ffn=53248)
NEMO25 = "NeMo 25.02 performance summary (docs.nvidia.com, DGX-B200)"
BRIDGE = "Megatron-Bridge performance summary (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 4ab94dfa)"


def blackwell(name, source, gpu, model, seq, gpus, gbs, mbs, tp, pp, vp, measured, zero=1,
              note=""):
    row = nemo(name, source, model, seq, gpus, gbs, mbs, tp, pp, vp, "fp8", measured, note)
    row.update(gpu=gpu, zero=zero)
    if zero == 3:
        row["framework"] = "fsdp"
    return row


ROWS += [
    blackwell("nemo-b200-gpt3-175b-fp8", NEMO25, "b200", GPT3_175B, 2048, 512, 2048, 2, 4, 4, 6,
              1600),
    blackwell("nemo-b200-llama3-8b-fp8", NEMO25, "b200", LLAMA3_8B, 8192, 8, 128, 2, 1, 1, 1,
              26006),
    blackwell("nemo-b200-nemotron4-15b-fp8", NEMO25, "b200", NEMOTRON4_15B, 4096, 64, 256, 2, 1,
              1, 1, 14760),
    blackwell("nemo-b200-nemotron4-340b-fp8", NEMO25, "b200", NEMOTRON4_340B, 4096, 128, 32, 1,
              8, 4, 12, 602),
    blackwell("bridge-b200-llama3-8b-fp8", BRIDGE + ", 25.11", "b200", LLAMA3_8B, 8192, 8, 128,
              2, 1, 1, 1, 30624),
    blackwell("bridge-gb200-llama3-8b-fp8", BRIDGE + ", 25.11", "gb200", LLAMA3_8B, 8192, 8, 128,
              2, 1, 1, 1, 31508),
    # Its recipe (perf_recipes/llama/gb200/llama3.py, llama3_70b_pretrain_64gpu_gb200_fp8cs)
    # offloads the first 40 layers' activations to the Grace CPU (cpu_offloading_num_layers).
    dict(blackwell("bridge-gb200-llama3-70b-fp8", BRIDGE + ", 25.11 (FSDP over 64)", "gb200",
                   LLAMA3_70B, 8192, 64, 256, 2, 1, 1, 1, 4312, zero=3), offload_layers=40),
    blackwell("bridge-gb200-llama3.1-405b-fp8", BRIDGE + ", 25.11", "gb200", LLAMA31_405B, 8192,
              256, 1536, 1, 4, 16, 4, 813),
]

# llm-foundry's large-scale H100 table (same README @ b2a43a14, "H100 80GB BF16 (Large
# Scale, >= 128 GPUs)"): sequence 2048, one micro-batch per iteration, 128-512 GPUs,
# FULL_SHARD from 7B up (SHARD_GRAD_OP below), full recompute from 13B up. The network is
# not stated: eight 400 Gbit/s ports per node assumed, as on a DGX H100.
for size, mbs, ac, measured in (("70b", 8, True, (1007, 1035, 1058)),
                                ("30b", 8, True, (2115, 2148, 2199)),
                                ("13b", 16, True, (4952, 4989, 5080)),
                                ("7b", 6, False, (9670, 10119, 10475)),
                                ("3b", 8, False, (21664, 22772, 23422)),
                                ("1b", 12, False, (39837, 42555, 44123))):
    for gpus, tps in zip((512, 256, 128), measured):
        ROWS.append(dict(name=f"foundry-large-mpt-{size}-{gpus}", source=FOUNDRY,
                         model=MPT_SIZES[size], seq=2048, gpus=gpus, gbs=mbs * gpus, mbs=mbs,
                         tp=1, pp=1, vp=1, precision="bf16", measured=tps,
                         recompute="full" if ac else "none", framework="fsdp",
                         gpu="h100-80gb", zero=3 if size in ("7b", "13b", "30b", "70b") else 2,
                         gradients="fp32", note="", attention_kernel="triton"))

# Context and expert parallelism (H100). The NeMo 24.07 rows above left for it (CP 2), the
# Megatron-LM Llama example's (NVIDIA/Megatron-LM examples/llama/README.md: FP8, H100 implied
# by its scripts), Megatron-Bridge's MoE rows (performance-summary-archive.md @ 4ab94dfa;
# force-balanced routing, dropless) and dgxc-benchmarking's Grok-1 (grok1/README.md @
# dfc80397, NeMo 25.04, ETP 1; tokens/s/GPU = seq x GBS / step time / GPUs). Models as
# published (scenarios/models/*.yaml); Grok-1: 64 layers, hidden 6144, 48 heads with 8
# key/value heads, 8 GeGLU experts of 32768, top 2, vocabulary 131072.
QWEN3 = dict(mlp="swiglu", norm="rmsnorm", position="rotary", vocab=151936,
             tie_embeddings=False, head_dim=128, query_groups=4, top_k=8, experts=128)
QWEN3_30B = dict(QWEN3, layers=48, hidden=2048, heads=32, ffn=6144, expert_ffn=768)
QWEN3_235B = dict(QWEN3, layers=94, hidden=4096, heads=64, ffn=12288, expert_ffn=1536)
GROK1 = dict(mlp="geglu", norm="rmsnorm", position="rotary", vocab=131072, layers=64,
             hidden=6144, heads=48, query_groups=8, ffn=32768, experts=8, top_k=2)
LLAMA_MLM = "Megatron-LM Llama example (NVIDIA/Megatron-LM examples/llama/README.md @ bd32927e)"
GROK = "dgxc-benchmarking (NVIDIA/dgxc-benchmarking grok1/README.md @ dfc80397)"


def parallel(row, cp=1, ep=1, dispatch="alltoall", etp=1):
    row.update(cp=cp, ep=ep, group="moe-cp", dispatch=dispatch, etp=etp)
    return row

# Blackwell Ultra (GB300 NVL72) in the same 25.11 table: runs no fit has seen, on the
# Blackwell levels (docs/validation.md, "Blackwell Ultra out of sample"). The 70B
# recipe (scripts/performance/configs/llama3/workload_base_configs.py @ v0.2.0,
# LLAMA3_70B_GB300_FP8_CS_BASE_CONFIG) offloads 20 layers where GB200's offloads 40.
ROWS += [
    blackwell("bridge-gb300-llama3-8b-fp8", BRIDGE + ", 25.11", "gb300", LLAMA3_8B, 8192, 8, 128,
              2, 1, 1, 1, 37556),
    dict(blackwell("bridge-gb300-llama3-70b-fp8", BRIDGE + ", 25.11 (FSDP over 64)", "gb300",
                   LLAMA3_70B, 8192, 64, 256, 2, 1, 1, 1, 4520, zero=3), offload_layers=20),
    parallel(blackwell("bridge-gb300-llama3.1-405b-fp8", BRIDGE + ", 25.11", "gb300",
                       LLAMA31_405B, 8192, 256, 1536, 1, 2, 8, 4, 999), cp=2),
]


# NVFP4 (training.precision: nvfp4) against fp8 on one layout, Megatron-Bridge 26.04.01 (the
# same archive): Llama 3 70B on 64 GPUs (PP 4, VP 5, MBS 1; GB300 TP 1, GB200 TP 2) and
# Llama 3.1 405B on 256 (TP 4, PP 8, VP 4 on GB300; PP 16, VP 8 on GB200, whose fp8 run had
# VP 4), each beside its fp8 twin (MXFP8 for the 70B, run as fp8; FP8-CS for the 405B). The
# recipes (perf_recipes/llama/{gb300,gb200}/llama3*.py at HEAD, 067f987d; bf16_with_nvfp4_mixed
# in src/megatron/bridge/training/mixed_precision.py: every layer in NVFP4,
# fp4_param_gather) recompute nothing. No fit has seen an NVFP4 run.
def nvfp4(row):
    row["precision"] = "nvfp4"
    return row


ROWS += [
    nvfp4(blackwell("bridge-gb300-llama3-70b-nvfp4", BRIDGE + ", 26.04.01", "gb300", LLAMA3_70B,
                    8192, 64, 256, 1, 1, 4, 5, 7296)),
    blackwell("bridge-gb300-llama3-70b-mxfp8", BRIDGE + ", 26.04.01 (MXFP8, run as fp8)",
              "gb300", LLAMA3_70B, 8192, 64, 256, 1, 1, 4, 5, 4864),
    nvfp4(blackwell("bridge-gb200-llama3-70b-nvfp4", BRIDGE + ", 26.04.01", "gb200", LLAMA3_70B,
                    8192, 64, 256, 1, 2, 4, 5, 4864)),
    blackwell("bridge-gb200-llama3-70b-mxfp8", BRIDGE + ", 26.04.01 (MXFP8, run as fp8)",
              "gb200", LLAMA3_70B, 8192, 64, 256, 1, 2, 4, 5, 3712),
    nvfp4(blackwell("bridge-gb300-llama3.1-405b-nvfp4", BRIDGE + ", 26.04.01", "gb300",
                    LLAMA31_405B, 8192, 256, 1536, 1, 4, 8, 4, 1440)),
    blackwell("bridge-gb300-llama3.1-405b-fp8cs", BRIDGE + ", 26.04.01", "gb300", LLAMA31_405B,
              8192, 256, 1536, 1, 4, 8, 4, 1024),
    nvfp4(blackwell("bridge-gb200-llama3.1-405b-nvfp4", BRIDGE + ", 26.04.01", "gb200",
                    LLAMA31_405B, 8192, 256, 1536, 1, 4, 16, 8, 1184)),
]

# Qwen3-30B-A3B: the 26.x recipes use the flex dispatcher with HybridEP; from 26.02 to
# 26.02.01 the same layout went from 5113 to 9058 tokens/s/GPU (the 25.11 row, 5275, is of
# the slow software), so the 26.02.01 row stands for that layout.


ROWS += [
    parallel(nemo("nemo-llama3-8b-cp2-fp8", NEMO, LLAMA3_8B, 8192, 8, 128, 1, 1, 1, 1, "fp8",
                  12036), cp=2),
    parallel(nemo("nemo-llama3-70b-cp2-fp8", NEMO, LLAMA3_70B, 8192, 64, 128, 1, 4, 4, 5, "fp8",
                  1533), cp=2),
    parallel(nemo("megatron-llama3-8b-cp2-fp8", LLAMA_MLM, LLAMA3_8B, 8192, 8, 128, 1, 1, 1, 1,
                  "fp8", 13812), cp=2),
    parallel(nemo("bridge-h100-qwen3-30b-a3b-fp8", BRIDGE + ", 26.06", QWEN3_30B, 4096, 16, 1024,
                  1, 1, 1, 1, "fp8", 8826), ep=16, dispatch="flex"),
    parallel(nemo("bridge-h100-qwen3-30b-a3b-pp2-fp8", BRIDGE + ", 26.02.01", QWEN3_30B, 4096,
                  16, 1024, 1, 1, 2, 12, "fp8", 9058), ep=8, dispatch="flex"),
    # The same EP 16 recipe in bf16 (Megatron-Bridge pull request #5094, merged, "perf(recipe):
    # overlap Qwen3 expert communication on H100": forced balancing, HybridEP, TE CUDA graphs
    # of the router and preprocessing), before the expert-communication overlap it enables:
    # 24.714 s a step (240.1 model TFLOP/s/GPU; 20.992 s with the overlap).
    parallel(nemo("bridge-h100-qwen3-30b-a3b-bf16", "Megatron-Bridge pull request #5094 "
                  "(NVIDIA-NeMo/Megatron-Bridge, merged 2026-07)", QWEN3_30B, 4096, 16, 1024,
                  1, 1, 1, 1, "bf16", 4096 * 1024 / 24.714 / 16, "step 24.714 s"), ep=16,
             dispatch="flex"),
    # (4.9e7 all-to-all transfers in all: past the op limit until its copies, one expert
    # group over all 16, were built a server at a time; 6 CPU-s now. `scan` leaves it out.)
    dict(parallel(nemo("bridge-h100-qwen3-235b-a22b-fp8", BRIDGE + ", 25.11", QWEN3_235B, 4096,
                       256, 2048, 1, 2, 8, 4, "fp8", 1575), ep=32), slow=True),
    parallel(nemo("dgxc-grok1-314b-bf16", GROK, GROK1, 8192, 512, 1024, 1, 4, 8, 8, "bf16",
                  8192 * 1024 / 15.933 / 512, "step 15.933 s", tensor_overlap="backward"),
             cp=2, ep=8),
    parallel(nemo("dgxc-grok1-314b-fp8", GROK, GROK1, 8192, 512, 1024, 1, 4, 8, 8, "fp8",
                  8192 * 1024 / 13.433 / 512, "step 13.433 s", tensor_overlap="backward"),
             cp=2, ep=8),
]


# Qwen3-30B-A3B on 8 B300 and on 8 B200 in one release (26.04.01; MXFP8, run as fp8), EP 8,
# the flex dispatcher with HybridEP, no recompute (perf_recipes/qwen/{b300,b200}/qwen3_moe.py
# at HEAD, 067f987d, for the layout; micro-batch 8 and 4 as the table says). The B300's
# figures are out of sample: no fit has seen a Blackwell Ultra run.
ROWS += [
    parallel(blackwell("bridge-b300-qwen3-30b-a3b-fp8", BRIDGE + ", 26.04.01", "b300", QWEN3_30B,
                       4096, 8, 512, 8, 1, 1, 1, 30720), ep=8, dispatch="flex"),
    parallel(blackwell("bridge-b200-qwen3-30b-a3b-fp8", BRIDGE + ", 26.04.01", "b200", QWEN3_30B,
                       4096, 8, 512, 4, 1, 1, 1, 27136), ep=8, dispatch="flex"),
]


# DeepSeek-V3 (scenarios/models/deepseek-v3.yaml with its multi-token-prediction depth,
# mtp_layers: 1) on 256 Blackwell GPUs in Megatron-Bridge's summaries, micro-batch 1, sequence
# 4096, TP 1, the 61 layers laid out as [embedding + 4] + 14 x [4] + [1 + MTP + loss] over
# 16 stages, the latent attention's up-projections recomputed (recompute_modules
# [mla_up_proj]). GB200 (25.09: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @
# r0.1.0 = 684a6861, FP8 current scaling; the recipe at that tag): PP 4, VP 4, EP 64, GBS
# 2048, token drop at capacity 1.0, the alltoall dispatcher with the shared expert beside
# it. B200 (26.02.01: performance-summary-archive.md @ 4ab94dfa, MXFP8, run here as fp8;
# the recipe at r0.3.0 = 8301abfc): PP 16, EP 8, GBS 4096, HybridEP (flex). The later
# GB200 rows (GBS 4096) are past the simulator's op limit.
DEEPSEEK_V3 = dict(mlp="swiglu", norm="rmsnorm", position="rotary", vocab=129280,
                   tie_embeddings=False, layers=61, hidden=7168, heads=128, ffn=18432,
                   latent=dict(kv_rank=512, q_rank=1536, rope_dim=64, head_dim=128),
                   experts=256, top_k=8, expert_ffn=2048, shared_experts=1, dense_first=3)
# Its multi-token-prediction depth (mtp_layers: 1, the recipes' mtp_num_layers) sits on the
# last stage with the last layer and the head: layers 61 (the last block), 62 (the head),
# 63-65 (the prediction's input, block and head).
DEEPSEEK_STAGES = ["0-4"] + [f"{5 + 4 * i}-{8 + 4 * i}" for i in range(14)] + ["61-65"]
BRIDGE_2509 = ("Megatron-Bridge performance summary, 25.09 (NVIDIA-NeMo/Megatron-Bridge "
               "docs/performance-summary.md @ 684a6861)")
for gpu, source, gbs, pp, vp, ep, measured, model, overlap, dispatch in (
        ("gb200", BRIDGE_2509, 2048, 4, 4, 64, 3454,
         dict(DEEPSEEK_V3, capacity_factor=1.0, mtp_layers=1), True, "alltoall"),
        ("b200", BRIDGE + ", 26.02.01", 4096, 16, 1, 8, 2790, dict(DEEPSEEK_V3, mtp_layers=1),
         False, "flex")):
    row = parallel(blackwell(f"bridge-{gpu}-deepseek-v3-fp8", source, gpu, model, 4096, 256, gbs,
                             1, 1, pp, vp, measured),
                   ep=ep, dispatch=dispatch)
    row.update(stages=DEEPSEEK_STAGES, recompute="selective", recompute_modules=["mla_up_proj"],
               shared_expert_overlap=overlap, slow=True)
    ROWS.append(row)

# dgxc-benchmarking's Grok-1 on GB200 NVL72 (grok1/README.md @ 1f6d9f40e4117d7c71b726f86074ac01c29f87f5,
# v25.05.04; the same figures at 68eaf7e1, 85d92846 and f041145f; NeMo 25.04): TP 4, PP 1,
# EP 8 with expert tensor parallelism 4 (ETP 4), data 32 / 64 / 128, micro-batch 1, GBS =
# 2 x GPUs (launch.sh), no recompute; tokens/s/GPU = seq x GBS / step time / GPUs. (The
# README's 512-GPU throughput is half of that; its MFU follows the step time.)
GROK_GB200 = ("dgxc-benchmarking (NVIDIA/dgxc-benchmarking grok1/README.md @ "
              "1f6d9f40e4117d7c71b726f86074ac01c29f87f5)")
for gpus, bf16, fp8 in ((128, 7.325, 5.298), (256, 7.39, 5.224), (512, 7.324, 5.193)):
    for prec, step in (("bf16", bf16), ("fp8", fp8)):
        row = nemo(f"dgxc-gb200-grok1-314b-{gpus}-{prec}", GROK_GB200, GROK1, 8192, gpus,
                   2 * gpus, 1, 4, 1, 1, prec, 8192 * 2 * gpus / step / gpus,
                   f"step {step} s, ETP 4", tensor_overlap="backward")
        row["gpu"] = "gb200"
        ROWS.append(parallel(row, ep=8, etp=4))


# dgxc-benchmarking's Llama 3.1 tables (llama3.1/README_{8b,70b,405b}.md @ 1b9bb6b3, NeMo
# 24.12, DGX-H100), BF16 and FP8 of one layout; recipes llama3.1/llama3.1_{8b,70b,405b}.yaml
# at that commit: micro-batch 1, no recompute, context parallel 2, distributed optimizer with
# both overlaps, gradients in bf16, tp_comm_overlap where TP > 1. tokens/s/GPU = seq x GBS /
# step time / GPUs at the smallest scale; 405B also at 576 GPUs, its first full-depth row
# (configure.sh: the 32-GPU run is a 7-layer proxy without a pipeline).
DGXC_LLAMA = "dgxc-benchmarking (NVIDIA/dgxc-benchmarking llama3.1/README_{}.md @ 1b9bb6b3)"
for prec, t8, t70, t405p, t405 in (("bf16", 12.78, 14.61, 9.00, 17.50),
                                   ("fp8", 9.44, 10.46, 5.75, 11.00)):
    ROWS += [
        parallel(nemo(f"dgxc-llama3.1-8b-cp2-{prec}", DGXC_LLAMA.format("8b"), LLAMA3_8B, 8192,
                      8, 128, 1, 1, 1, 1, prec, 8192 * 128 / t8 / 8, f"step {t8} s"), cp=2),
        parallel(nemo(f"dgxc-llama3.1-70b-cp2-{prec}", DGXC_LLAMA.format("70b"), LLAMA3_70B,
                      8192, 64, 128, 1, 4, 4, 5, prec, 8192 * 128 / t70 / 64, f"step {t70} s"),
                 cp=2),
        parallel(nemo(f"dgxc-llama3.1-405b-7l-cp2-{prec}", DGXC_LLAMA.format("405b"),
                      dict(LLAMA31_405B, layers=7), 8192, 32, 126, 1, 8, 1, 1, prec,
                      8192 * 126 / t405p / 32, f"step {t405p} s, 7-layer proxy"), cp=2),
        parallel(nemo(f"dgxc-llama3.1-405b-cp2-{prec}", DGXC_LLAMA.format("405b"), LLAMA31_405B,
                      8192, 576, 252, 1, 8, 9, 7, prec, 8192 * 252 / t405 / 576,
                      f"step {t405} s"), cp=2),
    ]

# Megatron-Bridge's Llama 3 70B on H100 (performance-summary-archive.md @ 4ab94dfa, release
# 26.04.01, FP8 current scaling): TP 4, PP 8, VP 5, no context parallelism, sequence
# parallelism and the tensor-parallel overlap on (perf_recipes/llama/h100/llama3.py), GBS 256,
# micro-batch 1, no recompute; tokens/s/GPU as printed.
ROWS.append(nemo("bridge-h100-llama3-70b-fp8", BRIDGE + ", 26.04.01", LLAMA3_70B, 8192, 64, 256,
                 1, 4, 8, 5, "fp8", 1664))
# The same release's Llama 3.1 405B on 1024 H100s: TP 8, PP 8, VP 8, CP 2, GBS 1536,
# micro-batch 1, the tensor-parallel overlap on (perf_recipes/llama/h100/llama31.py); no
# recompute assumed, as for the 70B. `scan` leaves it out (it took minutes to simulate before
# context groups folded; the scan tables in docs/presets.md were made without it).
ROWS.append(dict(parallel(nemo("bridge-h100-llama3.1-405b-fp8", BRIDGE + ", 26.04.01",
                               LLAMA31_405B, 8192, 1024, 1536, 1, 8, 8, 8, "fp8", 328), cp=2),
                 slow=True))

# dgxc-benchmarking v25.05.04 (NeMo 25.04; llama3.1/README.md and nemotron/README.md @
# 1f6d9f40e4117d7c71b726f86074ac01c29f87f5; launch.sh there sets each layout, NeMo's
# scripts/performance/llm/pretrain_*.py @ v2.3.1 the rest: no recompute, the tensor-parallel
# overlap with userbuffers). tokens/s/GPU = seq x GBS / step time / GPUs.
DGXC_2505 = ("dgxc-benchmarking v25.05.04 (NVIDIA/dgxc-benchmarking {} @ "
             "1f6d9f40e4117d7c71b726f86074ac01c29f87f5)")
for prec, t405, t15, t340 in (("bf16", 19.810, 2.746, 4.606), ("fp8", 13.020, 1.988, 3.107)):
    # Llama 3.1 405B on 512 H100s: TP 8, PP 8, VP 8, CP 2, DP 4, GBS 256 (= GPUs / 2).
    ROWS.append(parallel(nemo(f"dgxc2505-llama3.1-405b-cp2-{prec}",
                              DGXC_2505.format("llama3.1/README.md"), LLAMA31_405B, 8192, 512,
                              256, 1, 8, 8, 8, prec, 8192 * 256 / t405 / 512, f"step {t405} s"),
                         cp=2))
    # Nemotron-4 15B on 16 H100s: TP 2, MBS 2, GBS 64; 340B on 256: TP 8, PP 8, VP 12, GBS 64.
    ROWS += [
        nemo(f"dgxc2505-nemotron4-15b-{prec}", DGXC_2505.format("nemotron/README.md"),
             NEMOTRON4_15B, 4096, 16, 64, 2, 2, 1, 1, prec, 4096 * 64 / t15 / 16,
             f"step {t15} s"),
        nemo(f"dgxc2505-nemotron4-340b-{prec}", DGXC_2505.format("nemotron/README.md"),
             NEMOTRON4_340B, 4096, 256, 64, 1, 8, 8, 12, prec, 4096 * 64 / t340 / 256,
             f"step {t340} s"),
    ]
# The same release on GB200 NVL72: Llama 3.1 405B at TP 4, PP 8, VP 8, CP 2, GBS = GPUs / 2;
# Nemotron-4 340B at TP 8, PP 4, VP 12, GBS = GPUs / 4 (weak scaling, 128-512 GPUs).
for gpus, b405, f405, b340, f340 in ((128, 9.347, 6.131, 2.189, 1.483),
                                     (256, 9.484, 6.183, 2.19, 1.517),
                                     (512, 9.508, 6.244, 2.229, 1.549)):
    for prec, s405, s340 in (("bf16", b405, b340), ("fp8", f405, f340)):
        row = parallel(nemo(f"dgxc2505-gb200-llama3.1-405b-{gpus}-{prec}",
                            DGXC_2505.format("llama3.1/README.md"), LLAMA31_405B, 8192, gpus,
                            gpus // 2, 1, 4, 8, 8, prec, 8192 * (gpus // 2) / s405 / gpus,
                            f"step {s405} s"), cp=2)
        row["gpu"] = "gb200"
        ROWS.append(row)
        row = blackwell(f"dgxc2505-gb200-nemotron4-340b-{gpus}-{prec}",
                        DGXC_2505.format("nemotron/README.md"), "gb200", NEMOTRON4_340B, 4096,
                        gpus, gpus // 4, 1, 8, 4, 12, 4096 * (gpus // 4) / s340 / gpus,
                        note=f"step {s340} s")
        row["precision"] = prec
        ROWS.append(row)

# NeMo Automodel, PyTorch-native (NVIDIA-NeMo/Automodel docs/performance-summary.md @
# e45812012, DGX-H100, BF16): Llama 3.1 70B on 64 GPUs, FSDP2 over 32 x CP 2, micro-batch 1,
# GBS 128, sequence 8192, activation checkpointing, 18.90 s a step
# (examples/llm_benchmark/llama3_3/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml: bf16
# weights, FSDP2Config's bf16 reduction, Transformer Engine's FusedAdam without master
# weights, its moments in fp32). Added after the fits, held out.
ROWS.append(dict(parallel(nemo("automodel-h100-llama3.1-70b-cp2-bf16",
                               "NeMo Automodel performance summary (NVIDIA-NeMo/Automodel "
                               "docs/performance-summary.md @ e45812012)", LLAMA3_70B, 8192, 64,
                               128, 1, 1, 1, 1, "bf16", 128 * 8192 / 18.90 / 64, "step 18.90 s",
                               recompute="full"), cp=2),
                 framework="fsdp", zero=3, master_weights="none", held_out="Automodel"))

# Rows no fit has used (Blackwell Ultra, NVFP4 and their twins of the same release), held out
# as the other sets above are: `held_out` names the set; `scan` leaves every held-out row out
# and `compare` sums each set apart, so that they stay a check out of sample.
HELD_OUT = {"bridge-gb300-llama3-8b-fp8", "bridge-gb300-llama3-70b-fp8",
            "bridge-gb300-llama3.1-405b-fp8", "bridge-gb300-llama3-70b-nvfp4",
            "bridge-gb300-llama3-70b-mxfp8", "bridge-gb200-llama3-70b-nvfp4",
            "bridge-gb200-llama3-70b-mxfp8", "bridge-gb300-llama3.1-405b-nvfp4",
            "bridge-gb300-llama3.1-405b-fp8cs", "bridge-gb200-llama3.1-405b-nvfp4",
            "bridge-b300-qwen3-30b-a3b-fp8", "bridge-b200-qwen3-30b-a3b-fp8"}
for row in ROWS:
    if row["name"] in HELD_OUT:
        row["held_out"] = "Blackwell Ultra, NVFP4"

# The fp8 runs keep the weights in fp8 alone and gather them in fp8 (training.fp8_params),
# as each source's recipe says:
# - Megatron-Bridge: scripts/performance/utils/helpers.py get_precision_config (r0.2.0 @
#   04651896) takes bf16_with_fp8_current_scaling_mixed or bf16_with_mxfp8_mixed
#   (src/megatron/bridge/training/mixed_precision.py), both with fp8_param_gather = True
#   (the same in today's perf_recipes/_common.py _perf_precision);
# - NeMo 25.x's scripts/performance (the NeMo 25.02-25.04 B200 rows, dgxc-benchmarking
#   v25.05 and Grok-1's launch.sh, --compute_dtype fp8): helpers.py puts
#   bf16_with_fp8_mixed (nemo/collections/llm/recipes/precision/mixed_precision.py:
#   fp8_param_gather = True) on the recipe;
# - dgxc-benchmarking @ 1b9bb6b3 (NeMo 24.12): configure.sh sets model.fp8_params to
#   FP8_ENABLED (llama3.1, nemotron), gpt3_175b_hydra.yaml fp8_params: true;
# - Megatron-LM's Llama example (examples/llama/train_llama3_8b_h100_fp8.sh @ bd32927e):
#   --fp8-param-gather.
# NeMo 24.07's rows keep the simulator's default (16-bit weights beside their fp8 copy):
# that release's launcher configs are not in the sources here.
# - Megatron-Bridge's NVFP4 rows: bf16_with_nvfp4_mixed, fp4_param_gather = True.
for row in ROWS:
    if row["precision"] in ("fp8", "nvfp4") and row["source"] != NEMO:
        row["fp8_params"] = True

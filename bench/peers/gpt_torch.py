#!/usr/bin/python3
"""The peer of vescale-train's GPT in plain PyTorch: the same model, data windows, AdamW, clipping
and learning-rate schedule, on 1 process, on N processes over Gloo (DistributedDataParallel,
FSDP2 or DTensor tensor parallelism), or on one GPU.

    /usr/bin/python3 bench/peers/gpt_torch.py CONFIG.toml [--section.key=value ...]
        [--nproc N [--fsdp | --tp]] [--threads N] [--attention masked|additive|sdpa] [--foreach]
        [--init DIR --start-step K] [--dump DIR] [--log-steps]
        [--device cpu|cuda] [--compile] [--json] [--warmup N]

It reads the job config vescale-train reads (the keys below; others are ignored), so both train
the same sizes. What it matches, and where in vescale-train it comes from:
  - model (models/gpt.cpp, models/layers.cpp): wte [V_padded, C] (V padded to a multiple of
    model.vocab_multiple x parallel.tp), wpe [block_size, C]; blocks of ln_1, attention with
    separate q_proj / k_proj / v_proj and c_proj (all with bias), ln_2, MLP c_fc (C -> 4C), exact
    (erf) GELU, c_proj; ln_f; lm_head tied to wte; padded logits masked to -inf; LayerNorm eps
    1e-5; init N(0, 0.02), the c_proj weights N(0, 0.02 / sqrt(2 n_layer)), biases 0, norms 1/0.
  - attention (lib/dtensor/ops.cpp causal_attention, its CPU path): matmul, scale 1/sqrt(D),
    causal -inf mask, softmax, matmul (no fused kernel: vescale uses none on the CPU either).
  - loss: mean next-token cross entropy over the global batch.
  - AdamW (lib/optim/adamw.cpp): torch.optim.AdamW, decoupled decay on parameters of >= 2 dims
    only; clipping of the global norm (torch.nn.utils.clip_grad_norm_); warmup + cosine
    (lib/optim/lr_schedule.cpp).
  - data (lib/data/token_data.cpp): data.source = "text": a text file's bytes, the last
    data.val_fraction held out; "synthetic": vescale's learnable stream of 1M tokens (each 5 x the
    previous + 3 mod model.vocab_size, plus 1 with probability 0.1) drawn by a torch.Generator
    seeded from training.seed, so the same task but not the same tokens. Each row a window of
    seq_len + 1 tokens at a uniform position in the train split (a different generator than
    vescale's, so not the same windows).
  - dtype (training.dtype): float32 and float64 parameters and compute; bfloat16 as nanoGPT does
    it: float32 parameters and AdamW state, the forward under torch.autocast(bfloat16) (on the
    CPU too, where this torch has CPU autocast), the loss of float32 logits. --fsdp is the
    exception: see below.
Prints `peer done: N steps, X tokens/s (...), peak RSS Y MiB` with tokens/s over steps 2..N, as
vescale-train's `done:`, and the peak resident memory of the largest rank (ru_maxrss, gathered
from the N processes by an all-reduce of their maximum).

The N processes (--nproc N; this script launches them, rendezvous on loopback, one Gloo group):
  - DDP (no flag): DistributedDataParallel, as vescale-train's parallel.dp = N (gpt/dp-only).
    Each rank trains global_batch_size / N rows of its own generator (seeded training.seed x 1000
    + rank); the gradients are averaged.
  - --fsdp: FSDP2 (torch.distributed.fsdp.fully_shard; torch 2.4/2.5's
    torch.distributed._composable.fsdp) on a 1-D DeviceMesh of the N processes, as
    vescale-train's parallel.zero = 3 over dp = N: fully_shard on every Block, then on the root
    (wte, tied to the lm_head, wpe and ln_f), reshard_after_forward. Every parameter is a DTensor
    of its dim-0 rows on each rank; a Block's are all-gathered before its forward and again before
    its backward and freed after each; the gradients are reduce-scattered (averaged). The data are
    DDP's, so it computes DDP's losses. AdamW and clip_grad_norm_ work on the DTensor shards.
    bfloat16: FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32) instead of
    autocast (as torchtitan runs FSDP): bfloat16 parameters gathered and computed with, LayerNorm
    and softmax included, float32 gradients reduced onto float32 shards. It gathers half the bytes
    and casts each weight once a step: faster on the CPU than autocast under FSDP2, with losses
    as close to DDP's as bfloat16 allows.
  - --tp: Megatron tensor parallelism with sequence parallelism through DTensor
    (torch.distributed.tensor.parallel.parallelize_module), as vescale-train's parallel.tp = N
    with plan gpt/megatron-sp, the way torchtitan's Llama plan is written. Between blocks the
    residual stream is each rank's T / N positions; ln_1, ln_2 and ln_f run under
    SequenceParallel; PrepareModuleInput all-gathers the sequence into the attention and the MLP;
    q_proj, k_proj, v_proj and c_fc are ColwiseParallel (a rank computes n_head / N heads and 4C / N
    of the MLP), the two c_proj RowwiseParallel with a reduce-scatter back to the sequence. wte is
    RowwiseParallel (vocabulary rows sharded, the ids replicated, its output reduce-scattered to
    the sequence), wpe replicated with its output cut to the rank's positions. The lm_head is
    ColwiseParallel on the vocabulary and stays tied: a Linear holding wte's weight, both styles
    shard its dim 0, so it is set back to wte's DTensor after the plan. The logits stay sharded on
    the vocabulary (the padded rows -inf) into loss_parallel's cross entropy. Every rank trains
    the same global_batch_size rows (the generator of rank 0), so it computes 1 process's losses.
    The vocabulary is padded as vescale-train's with parallel.tp = N; n_head and seq_len must
    divide by N. The LayerNorms' gradients come out of the backward as Partial sums and are
    all-reduced before the clipping (torch 2.11's in-place torch._foreach_mul_, with which
    clip_grad_norm_ scales, leaves a Partial DTensor unscaled). bfloat16: autocast over DTensor.
  In float64 (--log-steps), --fsdp gives DDP's losses on the same N and --tp 1 process's, to a few
  units of the last place (2e-16 relative over 10 steps with torch 2.11).
--init DIR loads parameters (and exp_avg / exp_avg_sq) from raw float64 files DIR/<fqn>.bin
(bench/README.md); --dump DIR writes the final parameters the same way (for the check in
tests/e2e/test_peers.py); both in every mode (--fsdp and --tp shard what they read and gather
what they write). --log-steps prints every step's loss (rank 0's) and gradient norm.

--device cuda runs one process on the GPU with vescale's fast paths (NOTE [Fast paths]):
attention through F.scaled_dot_product_attention(is_causal=True) where this torch has it and the
dtype is not float64 (--attention chooses otherwise; on the CPU the default stays "masked"),
AdamW with fused=True where this torch has it (else foreach), TF32 matmuls allowed; clocks are
read after torch.cuda.synchronize(). --compile runs the model through torch.compile (a torch
without it: exit 2): the whole model, DDP-wrapped on N processes; under --fsdp and --tp each Block
(Module.compile) before the sharding, as torchtitan (on the CPU Inductor builds C++ with the
system's compiler; the first steps take a minute). --json prints, as the last line, one JSON
object: who, torch, device, dtype, attention, parallel (none, ddp, fsdp2 or tp), nproc,
params, batch, seq, steps, tokens_per_s and median_step_ms (the median step after the first
--warmup steps: 10 on cuda, 1 on cpu), flops_per_token (6 N + 12 L C T, N every parameter, as
vescale-train's MFU counts them: models/gpt_family.cpp), mfu (against metrics.peak_flops, null
when it is 0), peak_alloc_bytes and peak_reserved_bytes (torch.cuda.max_memory_allocated /
reserved; null on the CPU), peak_rss_bytes (the done line's peak RSS), warmup_s (the warm-up
steps' time: torch.compile's shows there), loss_first and loss_last (rank 0's). A mistake in the
input, or something this torch lacks (--fsdp and --tp on Debian's 1.13): one line on standard
error and exit 2.
"""
import argparse
import contextlib
import importlib
import inspect
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import tomllib
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

# The config keys the peer reads, with vescale-train's defaults (docs/configuration.md).
DEFAULTS = {
    "model.vocab_size": 256, "model.block_size": 64, "model.n_layer": 2, "model.n_head": 4,
    "model.n_embd": 64, "model.dropout": 0.0, "model.vocab_multiple": 64,
    "parallel.tp": 1,
    "data.source": "synthetic", "data.path": "", "data.val_fraction": 0.1,
    "training.steps": 100, "training.global_batch_size": 8, "training.seq_len": 64,
    "training.seed": 0, "training.dtype": "float32", "training.grad_clip": 1.0,
    "optimizer.name": "adamw", "optimizer.lr": 3e-4, "optimizer.beta1": 0.9,
    "optimizer.beta2": 0.95, "optimizer.eps": 1e-8, "optimizer.weight_decay": 0.1,
    "lr_scheduler.warmup_steps": 0, "lr_scheduler.decay": "cosine",
    "lr_scheduler.min_lr_ratio": 0.1,
    "metrics.peak_flops": 0.0,
}
DTYPES = ("float32", "float64", "bfloat16")


def refuse(message):
    """A mistake in the input or a feature this torch lacks: one line, exit 2 (as vescale-train)."""
    print(f"[peer] {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def load_config(path, overrides):
    """The DEFAULTS keys from the TOML file, then `--section.key=value` overrides."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    c = dict(DEFAULTS)
    for section, table in doc.items():
        for key, value in table.items():
            if f"{section}.{key}" in c:
                c[f"{section}.{key}"] = value
    for item in overrides:
        key, _, value = item[2:].partition("=")
        if key not in c:
            continue  # job.*, eval.*, parallel.dp, ...: vescale-train's business
        kind = type(DEFAULTS[key])
        c[key] = value if kind is str else kind(float(value)) if kind is int else kind(value)
    if c["data.source"] not in ("text", "synthetic"):
        refuse("only data.source = \"text\" or \"synthetic\" is supported")
    if c["model.dropout"] != 0:
        refuse("dropout is not supported (vescale's masks are layout-free Philox)")
    if c["optimizer.name"] != "adamw":
        refuse("only optimizer.name = \"adamw\" is supported")
    if c["training.dtype"] not in DTYPES:
        refuse(f"training.dtype = \"{c['training.dtype']}\": expected one of {', '.join(DTYPES)}")
    return c


# --attention: "masked" computes scores as nanoGPT's CPU path does ((q @ k^T) * scale, then
# masked_fill with the causal mask); "additive" as vescale-train's kernel (NOTE [Explicit
# attention] in lib/kernels/local_kernels.h: bmm, then add(bias, scores, alpha=scale) with a cached
# 0/-inf bias). Same values bit for bit; the second saves passes over the scores. "sdpa" is
# torch's fused kernel (flash attention on a GPU), what vescale-train runs on CUDA off float64.
ATTENTION = "masked"


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, n_layer, block_size):
        super().__init__()
        self.head_dim = n_embd // n_head
        self.q_proj = nn.Linear(n_embd, n_embd)
        self.k_proj = nn.Linear(n_embd, n_embd)
        self.v_proj = nn.Linear(n_embd, n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.c_proj.residual_scale = True
        # Not a buffer: DDP would broadcast it, and Gloo has no bool.
        self.future = torch.ones(block_size, block_size, dtype=torch.bool).triu(1)
        self.bias = torch.zeros(block_size, block_size).masked_fill(self.future, float("-inf"))

    def forward(self, x):
        b, t, _ = x.shape
        d = self.head_dim

        def heads(proj):  # -1: the heads this rank holds (all but under --tp)
            return proj(x).view(b, t, -1, d).transpose(1, 2)

        q, k, v = heads(self.q_proj), heads(self.k_proj), heads(self.v_proj)
        if ATTENTION == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif ATTENTION == "additive":
            h = q.size(1)
            bh = b * h
            scores = torch.add(self.bias[:t, :t].to(q.dtype),
                               torch.bmm(q.reshape(bh, t, d), k.reshape(bh, t, d).transpose(1, 2)),
                               alpha=1.0 / math.sqrt(d))
            y = torch.bmm(torch.softmax(scores, -1), v.reshape(bh, t, d)).view(b, h, t, d)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
            y = torch.matmul(torch.softmax(scores, -1), v)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.c_proj.residual_scale = True

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_layer, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, n_layer, block_size)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def padded_vocab(c):
    multiple = max(1, c["model.vocab_multiple"]) * max(1, c["parallel.tp"])
    return (c["model.vocab_size"] + multiple - 1) // multiple * multiple


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        n_embd, n_layer = c["model.n_embd"], c["model.n_layer"]
        self.vocab, self.padded = c["model.vocab_size"], padded_vocab(c)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(self.padded, n_embd),
            wpe=nn.Embedding(c["model.block_size"], n_embd),
            h=nn.ModuleList([Block(n_embd, c["model.n_head"], n_layer, c["model.block_size"])
                             for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd, eps=1e-5)))
        self.vocab_mask = torch.zeros(self.padded)  # 0 for the vocabulary, -inf for padding
        self.vocab_mask[self.vocab:] = float("-inf")
        self.lm_head = None  # --tp: a Linear holding wte.weight, for ColwiseParallel (tp_shard)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                std = 0.02 / math.sqrt(2 * n_layer) if getattr(module, "residual_scale", False) else 0.02
                nn.init.normal_(module.weight, 0.0, std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        h = self.transformer.ln_f(x)
        if self.lm_head is None:
            logits = F.linear(h, self.transformer.wte.weight)  # lm_head, tied
        else:
            logits = self.lm_head(h)
        if logits.dtype == torch.bfloat16:  # the loss in float32 (autocast's, torchtitan's)
            logits = logits.float()
        if self.padded > self.vocab:
            logits = logits + self.vocab_mask.to(logits.dtype)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def lr_at(step, c):
    """lib/optim/lr_schedule.cpp: linear warmup, then cosine to min_lr_ratio x peak (or constant)."""
    peak, warmup, total = c["optimizer.lr"], c["lr_scheduler.warmup_steps"], c["training.steps"]
    if step < warmup:
        return peak * (step + 1) / warmup
    if c["lr_scheduler.decay"] != "cosine" or total <= warmup:
        return peak
    progress = min(1.0, (step - warmup) / (total - warmup))
    low = peak * c["lr_scheduler.min_lr_ratio"]
    return low + 0.5 * (peak - low) * (1.0 + math.cos(math.pi * progress))


def train_split(c):
    """The train split: a text file's bytes, or the synthetic stream."""
    if c["data.source"] == "synthetic":
        return synthetic_split(c)
    with open(c["data.path"], "rb") as f:
        data = f.read()
    n_val = int(len(data) * c["data.val_fraction"])
    return torch.frombuffer(bytearray(data[:len(data) - n_val]), dtype=torch.uint8)


def synthetic_split(c):
    """lib/data/token_data.cpp synthetic_tokens' train split: 1M tokens, each 5 x the previous + 3
    mod vocab, plus 1 with probability 0.1 (here drawn by torch's generator, not vescale's
    Philox): a task the model can learn, so the loss falls as vescale-train's does."""
    vocab, seed, n = c["model.vocab_size"], c["training.seed"], 1 << 20
    bumps = (torch.rand(n, generator=torch.Generator().manual_seed(seed)) < 0.1).tolist()
    tokens = [seed % vocab]
    for i in range(1, n):
        tokens.append((5 * tokens[-1] + 3 + bumps[i]) % vocab)
    return torch.tensor(tokens, dtype=torch.long)


def batch(train, rows, seq_len, generator):
    """`rows` windows of seq_len + 1 bytes at uniform positions: inputs and next-token targets."""
    span = train.numel() - seq_len - 1
    starts = torch.randint(0, span, (rows,), generator=generator)
    windows = torch.stack([train[s:s + seq_len + 1] for s in starts.tolist()]).long()
    return windows[:, :-1], windows[:, 1:]


def load_state(model, optimizer, folder, start_step):
    """Parameters and AdamW moments from DIR/<fqn>.bin (raw float64, the parameter's shape)."""
    def read(name, like):
        path = os.path.join(folder, name + ".bin")
        with open(path, "rb") as f:
            values = torch.frombuffer(bytearray(f.read()), dtype=torch.float64)
        return values.view(like.shape).to(like.dtype)

    def laid_out(full, like):  # --fsdp / --tp: this rank's shard, placed as the parameter is
        if not is_dtensor(like):
            return full
        from torch.distributed.tensor import distribute_tensor
        return distribute_tensor(full, like.device_mesh, like.placements)

    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(laid_out(read(name, p), p))
            if start_step > 0:
                optimizer.state[p] = {"step": torch.tensor(float(start_step)),
                                      "exp_avg": laid_out(read(name + ".exp_avg", p), p),
                                      "exp_avg_sq": laid_out(read(name + ".exp_avg_sq", p), p)}


def dump_state(model, folder, rank):
    """Every rank takes part (a sharded parameter is gathered); rank 0 writes."""
    if rank == 0:
        os.makedirs(folder, exist_ok=True)
    for name, p in model.named_parameters():
        full = p.detach().full_tensor() if is_dtensor(p) else p.detach()
        if rank == 0:
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(full.cpu().to(torch.float64).contiguous().numpy().tobytes())


def is_dtensor(t):
    """A DTensor (--fsdp, --tp); False on a torch without them."""
    return type(t).__name__ == "DTensor" and hasattr(t, "full_tensor")


def scalar(t):
    """A 0-d tensor's value, gathered first if it is a DTensor (the loss under loss_parallel,
    clip_grad_norm_'s norm over DTensor gradients)."""
    return (t.full_tensor() if is_dtensor(t) else t).item()


# --fsdp and --tp: what each needs of torch, looked up only when asked for, so that a torch
# without them (Debian's 1.13) runs the other modes as before.
def failure(e):
    """An import's failure in a few words (Debian's 1.13 fails some with a ValueError)."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def fsdp_api():
    """(fully_shard, MixedPrecisionPolicy), or the reason this torch lacks them."""
    try:
        importlib.import_module("torch.distributed.device_mesh")
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # torch >= 2.6
        except ImportError:  # 2.4 and 2.5
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
    except Exception as e:  # noqa: BLE001 (any import failure means: not here)
        return (f"torch {torch.__version__} has no torch.distributed.fsdp.fully_shard "
                f"(FSDP2, PyTorch 2.4+; {failure(e)})")
    return fully_shard, MixedPrecisionPolicy


def tp_api():
    """None, or the reason this torch lacks DTensor tensor parallelism as torchtitan uses it."""
    needs = ("parallelize_module", "ColwiseParallel", "RowwiseParallel", "SequenceParallel",
             "PrepareModuleInput", "loss_parallel")
    try:
        importlib.import_module("torch.distributed.device_mesh")
        importlib.import_module("torch.distributed.tensor")
        parallel = importlib.import_module("torch.distributed.tensor.parallel")
    except Exception as e:  # noqa: BLE001
        return (f"torch {torch.__version__} has no torch.distributed.tensor.parallel "
                f"(DTensor tensor parallelism, PyTorch 2.5+; {failure(e)})")
    lacks = [name for name in needs if not hasattr(parallel, name)]
    if lacks:
        return (f"torch {torch.__version__}'s torch.distributed.tensor.parallel has no "
                f"{', '.join(lacks)} (PyTorch 2.5+)")
    return None


def fsdp_shard(model, c, world):
    """FSDP2 (ZeRO-3): fully_shard on every Block, then on the root, which holds wte (tied to the
    lm_head: one parameter, used twice inside the root's forward), wpe and ln_f. Parameters are
    DTensors sharded on dim 0 over a 1-D mesh of the N processes; the forward all-gathers a
    Block's before it runs and frees them after (reshard_after_forward), the backward gathers them
    again and reduce-scatters the gradients (averaged over the ranks, as DDP). bfloat16: FSDP2's
    MixedPrecisionPolicy (bfloat16 parameters gathered and computed with, gradients reduced in
    float32 onto the float32 shards that AdamW steps), as torchtitan runs FSDP; no autocast."""
    fully_shard, MixedPrecisionPolicy = fsdp_api()
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if c["training.dtype"] == "bfloat16" else MixedPrecisionPolicy())
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
    fully_shard(model, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
    return model


def tp_shard(model, world):
    """Megatron tensor parallelism with sequence parallelism through DTensor, as torchtitan's Llama
    plan: between blocks the residual stream is this rank's slice of the sequence (a local
    [B, T/N, C]); each LayerNorm runs under SequenceParallel on that slice; PrepareModuleInput
    all-gathers the sequence into the attention and the MLP; q/k/v_proj and c_fc are
    ColwiseParallel (this rank's n_head / N heads, 4C / N of the MLP), the two c_proj
    RowwiseParallel with a reduce-scatter back onto the sequence. wte is RowwiseParallel
    (vocabulary rows sharded, the ids replicated, its output reduce-scattered to the sequence
    slice); wpe is replicated and its output sliced to the same positions; the lm_head is
    ColwiseParallel on the vocabulary, Shard(-1) logits into loss_parallel. The lm_head stays
    tied: it is a Linear whose weight is wte's, and both styles shard dim 0 of it, so after the
    plan it is set back to wte's DTensor."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import (
        DTensor, Replicate, Shard, distribute_module, distribute_tensor)
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module)
    mesh = init_device_mesh("cpu", (world,))
    wte = model.transformer.wte
    model.lm_head = nn.Linear(wte.weight.size(1), wte.weight.size(0), bias=False, device="meta")
    model.lm_head.weight = wte.weight
    parallelize_module(model, mesh, {
        "transformer.wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "transformer.ln_f": SequenceParallel(),
        "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                   use_local_output=False),
    })
    gather_sequence = dict(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    for block in model.transformer.h:
        parallelize_module(block, mesh, {
            "ln_1": SequenceParallel(),
            "attn": PrepareModuleInput(**gather_sequence),
            "attn.q_proj": ColwiseParallel(),
            "attn.k_proj": ColwiseParallel(),
            "attn.v_proj": ColwiseParallel(),
            "attn.c_proj": RowwiseParallel(output_layouts=Shard(1)),
            "ln_2": SequenceParallel(),
            "mlp": PrepareModuleInput(**gather_sequence),
            "mlp.c_fc": ColwiseParallel(),
            "mlp.c_proj": RowwiseParallel(output_layouts=Shard(1)),
        })
    # wpe: replicated; the ids (all T positions) replicated in, the output cut to this rank's
    # slice of the sequence (whose backward all-gathers the slices' gradients).
    distribute_module(
        model.transformer.wpe, mesh,
        input_fn=lambda mod, inputs, mesh: tuple(
            DTensor.from_local(i, mesh, [Replicate()], run_check=False) for i in inputs),
        output_fn=lambda mod, out, mesh: out.redistribute(mesh, [Shard(0)]).to_local())
    tied = model.transformer.wte.weight
    assert model.lm_head.weight.placements == tied.placements, "wte and lm_head sharded alike"
    model.lm_head.weight = tied
    model.vocab_mask = distribute_tensor(model.vocab_mask, mesh, [Shard(0)])
    return model


def to_device(model, device):
    """The model on `device`, with the masks it holds as plain attributes (not buffers: see
    CausalSelfAttention) moved too."""
    model.to(device)
    model.vocab_mask = model.vocab_mask.to(device)
    for module in model.modules():
        if isinstance(module, CausalSelfAttention):
            module.future = module.future.to(device)
            module.bias = module.bias.to(device)
    return model


def pick_attention(args, c):
    """--attention, or its default: torch's fused kernel where vescale-train takes its own (CUDA,
    not float64; NOTE [Fast paths]), nanoGPT's masked path elsewhere."""
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if args.attention == "sdpa" and not has_sdpa:
        refuse(f"--attention=sdpa: torch {torch.__version__} has no "
               "F.scaled_dot_product_attention (PyTorch 2.0+)")
    if args.attention:
        return args.attention
    fused = args.device == "cuda" and c["training.dtype"] != "float64" and has_sdpa
    return "sdpa" if fused else "masked"


def make_optimizer(model, c, args):
    """AdamW with decay on >= 2-D parameters; on CUDA off float64 the fused kernel where this
    torch has it (vescale-train's fast path), else the multi-tensor one."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    kernel = {"foreach": args.foreach}
    if args.device == "cuda":
        has_fused = "fused" in inspect.signature(torch.optim.AdamW).parameters
        fused = has_fused and c["training.dtype"] != "float64" and not args.foreach
        kernel = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": c["optimizer.weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=c["optimizer.lr"], betas=(c["optimizer.beta1"], c["optimizer.beta2"]),
        eps=c["optimizer.eps"], **kernel)


def precision(device, dtype):
    """What the forward runs under: bfloat16 autocast (nanoGPT's recipe: float32 parameters and
    optimizer state, matmuls in bfloat16) or nothing."""
    if dtype != "bfloat16":
        return contextlib.nullcontext
    why = ""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # An autocast this torch cannot do warns and disables itself.
            if not getattr(torch.autocast(device, dtype=torch.bfloat16), "_enabled", True):
                why = "; ".join(str(w.message) for w in caught) or "autocast disabled itself"
    except (AttributeError, RuntimeError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
    if why:
        refuse(f"training.dtype = \"bfloat16\" on {device}: torch {torch.__version__} has no "
               f"bfloat16 autocast there ({why})")
    return lambda: torch.autocast(device, dtype=torch.bfloat16)


def check_device(args):
    """Refuses what this torch or this mode cannot do, before any work."""
    if args.compile and not hasattr(torch, "compile"):
        refuse(f"--compile: torch {torch.__version__} has no torch.compile (PyTorch 2.0+)")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            refuse(f"--device cuda: torch {torch.__version__} sees no GPU "
                   f"(CUDA {torch.version.cuda}, torch.cuda.is_available() is False)")
        if args.nproc > 1 or int(os.environ.get("WORLD_SIZE", "1")) > 1:
            refuse("--device cuda runs one process on one GPU: no --nproc")
        if args.init:
            refuse("--init is for the CPU's float64 checks (tests/e2e/test_peers.py)")
    mode = "--fsdp" if args.fsdp else "--tp" if args.tp else ""
    if args.fsdp and args.tp:
        refuse("--fsdp and --tp: one or the other (no 2-D mesh here)")
    if mode and args.nproc < 2:
        refuse(f"{mode} runs on N processes: give --nproc N (N >= 2)")
    if mode and args.device != "cpu":
        refuse(f"{mode} runs over Gloo on the CPU: no --device cuda")
    lacks = fsdp_api() if args.fsdp else tp_api() if args.tp else None
    if isinstance(lacks, str):
        refuse(f"{mode}: {lacks}")


def check_tp(args, c):
    """--tp --nproc N: heads, sequence and padded vocabulary divide by N. vescale-train pads the
    vocabulary to a multiple of model.vocab_multiple x parallel.tp; under --tp, parallel.tp is N."""
    if not args.tp:
        return
    c["parallel.tp"] = args.nproc
    for key in ("model.n_head", "training.seq_len"):
        if c[key] % args.nproc:
            refuse(f"--tp --nproc {args.nproc}: {key} = {c[key]} is not a multiple of {args.nproc}")


def flops_per_token(c, params):
    """models/gpt_family.cpp's count, which vescale-train's MFU uses: 6 FLOPs per parameter (every
    parameter, the tied wte once, wpe too) and token, plus attention's 12 C T per block."""
    return 6 * params + 12 * c["model.n_layer"] * c["model.n_embd"] * c["training.seq_len"]


def summary(c, args, model, tokens_per_step, times, losses, peak_rss):
    """The --json object over the steps after --warmup."""
    cuda = args.device == "cuda"
    params = sum(p.numel() for p in model.parameters())
    median_s = statistics.median(times[args.warmup:])
    tokens_per_s = tokens_per_step / median_s
    flops = flops_per_token(c, params)
    peak = c["metrics.peak_flops"]
    return dict(
        who="torch-compile" if args.compile else "torch-eager", torch=torch.__version__,
        device=args.device, device_name=torch.cuda.get_device_name() if cuda else None,
        dtype=c["training.dtype"], attention=ATTENTION, parallel=parallel_mode(args),
        nproc=args.nproc, params=params,
        batch=c["training.global_batch_size"], seq=c["training.seq_len"], steps=len(times),
        warmup=args.warmup, tokens_per_s=round(tokens_per_s, 1),
        median_step_ms=round(median_s * 1e3, 3), flops_per_token=flops,
        mfu=flops * tokens_per_s / peak if peak > 0 else None,
        peak_alloc_bytes=torch.cuda.max_memory_allocated() if cuda else None,
        peak_reserved_bytes=torch.cuda.max_memory_reserved() if cuda else None,
        peak_rss_bytes=peak_rss,
        warmup_s=round(sum(times[:args.warmup]), 3), loss_first=losses[0], loss_last=losses[-1])


def replicate_partial_grads(model):
    """--tp: the gradients of the replicated parameters that see a slice of the sequence (the
    LayerNorms under SequenceParallel) come out of the backward as Partial(sum) DTensors, a sum
    pending over the ranks. They are all-reduced here, once, into Replicate: clip_grad_norm_
    scales the gradients with torch._foreach_mul_, which in torch 2.11 leaves a Partial DTensor
    as it was (the norm itself is right), and AdamW would reduce them again at every use."""
    from torch.distributed.tensor import Replicate
    for p in model.parameters():
        g = p.grad
        if is_dtensor(g) and any(pl.is_partial() for pl in g.placements):
            p.grad = g.redistribute(g.device_mesh, [Replicate()] * g.device_mesh.ndim)


def parallel_mode(args):
    if args.nproc < 2:
        return "none"
    return "fsdp2" if args.fsdp else "tp" if args.tp else "ddp"


def peak_rss_bytes(world):
    """The largest peak resident set of the ranks (ru_maxrss: KiB on Linux); every rank calls."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if world > 1:
        peak = torch.tensor([kib], dtype=torch.int64)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        kib = int(peak.item())
    return kib * 1024


def run_rank(c, args, rank, world):
    global ATTENTION
    ATTENTION = pick_attention(args, c)
    device, cuda = args.device, args.device == "cuda"
    if cuda:  # vescale-train's float32 matmuls on CUDA are TF32 too (NOTE [Fast paths])
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # FSDP2 casts to bfloat16 itself (fsdp_shard); the other modes run the forward under autocast.
    autocast = precision(device, "float32" if args.fsdp else c["training.dtype"])
    torch.manual_seed(c["training.seed"])  # the same initial parameters on every rank
    dtype = torch.float64 if c["training.dtype"] == "float64" else torch.float32
    model = to_device(GPT(c).to(dtype), device)
    if args.compile and (args.fsdp or args.tp):
        for block in model.transformer.h:  # per Block, before the sharding, as torchtitan
            block.compile()
    if args.fsdp:
        fsdp_shard(model, c, world)
    elif args.tp:
        tp_shard(model, world)
    optimizer = make_optimizer(model, c, args)
    if args.init:
        load_state(model, optimizer, args.init, args.start_step)
    net = model
    if world > 1 and not (args.fsdp or args.tp):
        net = nn.parallel.DistributedDataParallel(model)
    if args.compile and not (args.fsdp or args.tp):
        net = torch.compile(net)
    loss_context = contextlib.nullcontext
    if args.tp:  # the cross entropy of Shard(-1) logits, forward and backward
        from torch.distributed.tensor.parallel import loss_parallel as loss_context

    train = train_split(c).to(device)
    # DDP and FSDP: each rank its own rows of the global batch; TP: every rank the same batch.
    stream = 0 if args.tp else rank
    generator = torch.Generator().manual_seed(c["training.seed"] * 1000 + stream)
    rows = c["training.global_batch_size"] // (1 if args.tp else world)
    seq_len = c["training.seq_len"]
    steps = c["training.steps"]
    timed_start = None
    times, losses = [], []
    for step in range(args.start_step, steps):
        sync()
        started = time.perf_counter()
        if step == args.start_step + 1:
            timed_start = started
        x, y = batch(train, rows, seq_len, generator)
        lr = lr_at(step, c)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with loss_context():
            with autocast():
                loss = net(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        if args.tp:
            replicate_partial_grads(model)
        clip = c["training.grad_clip"]
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf"))
        optimizer.step()
        sync()
        times.append(time.perf_counter() - started)
        if args.json:
            losses.append(scalar(loss))
        if args.log_steps:
            loss_value, norm_value = scalar(loss), scalar(norm)  # every rank: DTensors gather
            if rank == 0:
                print(f"step {step + 1} loss {loss_value:.17g} grad_norm {norm_value:.17g} "
                      f"lr {lr:.17g}", flush=True)
    ran = steps - args.start_step
    seconds = time.perf_counter() - timed_start if ran > 1 else 0.0
    peak_rss = peak_rss_bytes(world)
    if rank == 0 and ran > 1:
        tokens = c["training.global_batch_size"] * seq_len * (ran - 1)
        how = {"fsdp2": " FSDP2", "tp": " TP+SP"}.get(parallel_mode(args), "")
        where = torch.cuda.get_device_name() if cuda else (
            f"{world} process(es){how}, {torch.get_num_threads()} thread(s) each")
        print(f"peer done: {ran} steps, {tokens / seconds:.0f} tokens/s (python torch "
              f"{torch.__version__}, {where}), peak RSS {peak_rss / 2**20:.1f} MiB", flush=True)
    if args.dump:
        dump_state(model, args.dump, rank)
    if args.json and rank == 0:
        tokens_per_step = c["training.global_batch_size"] * seq_len
        print(json.dumps(summary(c, args, model, tokens_per_step, times, losses, peak_rss)),
              flush=True)


def store_env():
    """USE_LIBUV=0 where this torch was built without libuv (Debian 13's 2.6): torch >= 2.4 asks
    for a libuv store by default, which such a build refuses to create."""
    if "USE_LIBUV" in os.environ:
        return {}
    try:
        dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False, use_libuv=True)
    except TypeError:  # torch < 2.1: no libuv store at all
        return {}
    except RuntimeError as e:
        if "without libuv" in str(e):
            return {"USE_LIBUV": "0"}
        raise
    return {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--nproc", type=int, default=1, help="DDP over Gloo on N processes")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    parser.add_argument("--attention", choices=["masked", "additive", "sdpa"], default=None,
                        help="masked_fill as nanoGPT (the default on the CPU and in float64), "
                        "vescale-train's additive kernel, or F.scaled_dot_product_attention (the "
                        "default on CUDA)")
    parser.add_argument("--foreach", action="store_true",
                        help="AdamW's multi-tensor path (1.13's default is the per-tensor loop)")
    parser.add_argument("--init", default="", help="a folder of raw float64 <fqn>.bin tensors")
    parser.add_argument("--start-step", type=int, default=0, help="steps done before --init's state")
    parser.add_argument("--dump", default="", help="write the final parameters here")
    parser.add_argument("--log-steps", action="store_true", help="print every step's loss")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: one process on the GPU with the fast paths")
    parser.add_argument("--compile", action="store_true", help="the model through torch.compile")
    parser.add_argument("--fsdp", action="store_true",
                        help="with --nproc N: FSDP2 (fully_shard per Block and on the root)")
    parser.add_argument("--tp", action="store_true",
                        help="with --nproc N: DTensor tensor + sequence parallelism")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of figures")
    parser.add_argument("--warmup", type=int, default=None,
                        help="steps before those --json's medians count (10 on cuda, 1 on cpu)")
    args, overrides = parser.parse_known_args()
    bad = [o for o in overrides if not (o.startswith("--") and "=" in o)]
    if bad:
        refuse(f"overrides are --section.key=value, got {bad}")
    c = load_config(args.config, overrides)
    check_device(args)
    check_tp(args, c)
    if args.warmup is None:
        args.warmup = 10 if args.device == "cuda" else 1
    if args.json and c["training.steps"] - args.start_step <= args.warmup:
        refuse(f"--json measures the steps after --warmup {args.warmup}: training.steps = "
               f"{c['training.steps']} leaves none")
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.nproc > 1 and "RANK" not in os.environ:
        # The launcher: one process per rank, this script again, rendezvous on loopback.
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29400 + os.getpid() % 1000),
                   WORLD_SIZE=str(args.nproc), **store_env())
        procs = [subprocess.Popen([sys.executable, *sys.argv], env=dict(env, RANK=str(r)))
                 for r in range(args.nproc)]
        codes = [p.wait() for p in procs]
        sys.exit(max(codes, key=abs))
    if world > 1:
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    run_rank(c, args, rank, world)
    if world > 1:
        dist.barrier()  # no rank tears the group down while another still uses it
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The peer of vescale-train's GPT in plain PyTorch: the same model, data windows, AdamW, clipping
and learning-rate schedule, on 1 process or as DistributedDataParallel over Gloo on N processes,
or on one GPU.

    /usr/bin/python3 bench/peers/gpt_torch.py CONFIG.toml [--section.key=value ...]
        [--nproc N] [--threads N] [--attention masked|additive|sdpa] [--foreach]
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
    CPU too, where this torch has CPU autocast).
Prints `peer done: N steps, X tokens/s` with tokens/s over steps 2..N, as vescale-train's `done:`.
--init DIR loads parameters (and exp_avg / exp_avg_sq) from raw float64 files DIR/<fqn>.bin
(bench/README.md); --dump DIR writes the final parameters the same way (for the check in
tests/e2e/test_peers.py); --log-steps prints every step's loss and gradient norm.

--device cuda runs one process on the GPU with vescale's fast paths (NOTE [Fast paths]):
attention through F.scaled_dot_product_attention(is_causal=True) where this torch has it and the
dtype is not float64 (--attention chooses otherwise; on the CPU the default stays "masked"),
AdamW with fused=True where this torch has it (else foreach), TF32 matmuls allowed; clocks are
read after torch.cuda.synchronize(). --compile runs the model through torch.compile (a torch
without it: exit 2). --json prints, as the last line, one JSON object: who, torch, device,
params, batch, seq, steps, tokens_per_s and median_step_ms (the median step after the first
--warmup steps: 10 on cuda, 1 on cpu), flops_per_token (6 N + 12 L C T, N every parameter, as
vescale-train's MFU counts them: models/gpt_family.cpp), mfu (against metrics.peak_flops, null
when it is 0), peak_alloc_bytes and peak_reserved_bytes (torch.cuda.max_memory_allocated /
reserved; null on the CPU), warmup_s (the warm-up steps' time: torch.compile's shows there),
loss_first and loss_last. A mistake in the input, or something this torch lacks: one line on
standard error and exit 2.
"""
import argparse
import contextlib
import inspect
import json
import math
import os
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
        self.n_head = n_head
        self.q_proj = nn.Linear(n_embd, n_embd)
        self.k_proj = nn.Linear(n_embd, n_embd)
        self.v_proj = nn.Linear(n_embd, n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.c_proj.residual_scale = True
        # Not a buffer: DDP would broadcast it, and Gloo has no bool.
        self.future = torch.ones(block_size, block_size, dtype=torch.bool).triu(1)
        self.bias = torch.zeros(block_size, block_size).masked_fill(self.future, float("-inf"))

    def forward(self, x):
        b, t, c = x.shape

        def heads(proj):
            return proj(x).view(b, t, self.n_head, c // self.n_head).transpose(1, 2)

        q, k, v = heads(self.q_proj), heads(self.k_proj), heads(self.v_proj)
        d = c // self.n_head
        if ATTENTION == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif ATTENTION == "additive":
            bh = b * self.n_head
            scores = torch.add(self.bias[:t, :t].to(q.dtype),
                               torch.bmm(q.reshape(bh, t, d), k.reshape(bh, t, d).transpose(1, 2)),
                               alpha=1.0 / math.sqrt(d))
            y = torch.bmm(torch.softmax(scores, -1), v.reshape(bh, t, d)).view(b, self.n_head, t, d)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
            y = torch.matmul(torch.softmax(scores, -1), v)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


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
        logits = F.linear(self.transformer.ln_f(x), self.transformer.wte.weight)  # lm_head, tied
        if self.padded > self.vocab:
            logits = logits + self.vocab_mask.to(logits.dtype)
        return F.cross_entropy(logits.view(-1, self.padded), targets.reshape(-1))


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

    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(read(name, p))
            if start_step > 0:
                optimizer.state[p] = {"step": torch.tensor(float(start_step)),
                                      "exp_avg": read(name + ".exp_avg", p),
                                      "exp_avg_sq": read(name + ".exp_avg_sq", p)}


def dump_state(model, folder):
    os.makedirs(folder, exist_ok=True)
    for name, p in model.named_parameters():
        with open(os.path.join(folder, name + ".bin"), "wb") as f:
            f.write(p.detach().cpu().to(torch.float64).contiguous().numpy().tobytes())


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


def flops_per_token(c, params):
    """models/gpt_family.cpp's count, which vescale-train's MFU uses: 6 FLOPs per parameter (every
    parameter, the tied wte once, wpe too) and token, plus attention's 12 C T per block."""
    return 6 * params + 12 * c["model.n_layer"] * c["model.n_embd"] * c["training.seq_len"]


def summary(c, args, model, tokens_per_step, times, losses):
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
        dtype=c["training.dtype"], attention=ATTENTION, params=params,
        batch=c["training.global_batch_size"], seq=c["training.seq_len"], steps=len(times),
        warmup=args.warmup, tokens_per_s=round(tokens_per_s, 1),
        median_step_ms=round(median_s * 1e3, 3), flops_per_token=flops,
        mfu=flops * tokens_per_s / peak if peak > 0 else None,
        peak_alloc_bytes=torch.cuda.max_memory_allocated() if cuda else None,
        peak_reserved_bytes=torch.cuda.max_memory_reserved() if cuda else None,
        warmup_s=round(sum(times[:args.warmup]), 3), loss_first=losses[0], loss_last=losses[-1])


def run_rank(c, args, rank, world):
    global ATTENTION
    ATTENTION = pick_attention(args, c)
    device, cuda = args.device, args.device == "cuda"
    if cuda:  # vescale-train's float32 matmuls on CUDA are TF32 too (NOTE [Fast paths])
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    autocast = precision(device, c["training.dtype"])
    torch.manual_seed(c["training.seed"])
    dtype = torch.float64 if c["training.dtype"] == "float64" else torch.float32
    model = to_device(GPT(c).to(dtype), device)
    optimizer = make_optimizer(model, c, args)
    if args.init:
        load_state(model, optimizer, args.init, args.start_step)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    if args.compile:
        net = torch.compile(net)

    train = train_split(c).to(device)
    generator = torch.Generator().manual_seed(c["training.seed"] * 1000 + rank)
    rows, seq_len = c["training.global_batch_size"] // world, c["training.seq_len"]
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
        with autocast():
            loss = net(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip = c["training.grad_clip"]
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf"))
        optimizer.step()
        sync()
        times.append(time.perf_counter() - started)
        if args.json:
            losses.append(loss.item())
        if args.log_steps and rank == 0:
            print(f"step {step + 1} loss {loss.item():.17g} grad_norm {norm.item():.17g} lr {lr:.17g}",
                  flush=True)
    ran = steps - args.start_step
    if rank == 0 and ran > 1:
        seconds = time.perf_counter() - timed_start
        tokens = c["training.global_batch_size"] * seq_len * (ran - 1)
        where = torch.cuda.get_device_name() if cuda else (
            f"{world} process(es), {torch.get_num_threads()} thread(s) each")
        print(f"peer done: {ran} steps, {tokens / seconds:.0f} tokens/s (python torch "
              f"{torch.__version__}, {where})", flush=True)
    if args.dump and rank == 0:
        dump_state(model, args.dump)
    if args.json and rank == 0:
        tokens_per_step = c["training.global_batch_size"] * seq_len
        print(json.dumps(summary(c, args, model, tokens_per_step, times, losses)), flush=True)


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
    parser.add_argument("--json", action="store_true", help="end with one JSON line of figures")
    parser.add_argument("--warmup", type=int, default=None,
                        help="steps before those --json's medians count (10 on cuda, 1 on cpu)")
    args, overrides = parser.parse_known_args()
    bad = [o for o in overrides if not (o.startswith("--") and "=" in o)]
    if bad:
        refuse(f"overrides are --section.key=value, got {bad}")
    c = load_config(args.config, overrides)
    check_device(args)
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
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

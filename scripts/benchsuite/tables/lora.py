"""lora: LoRA against a full fine-tune from the same base, on llama-tiny (the walk-through's SFT
data, 200 steps) and TinyLlama's 1.1B shape (4 steps): grads and optimizer bytes, tokens/s, peak
RSS, val_loss."""
import re

from benchsuite import markdown, process, stats, trainlog
from benchsuite.pythons import torch_python
from benchsuite.tables import tiny

LORA_ALL = ["--lora.rank=16", "--lora.alpha=32",
            '--lora.targets=["q", "k", "v", "o", "gate", "up", "down"]']
BIG = ["configs/llama-1b.toml", *tiny.ONE_PROCESS, "--parallel.zero=0", "--parallel.microbatches=1",
       "--data.source=synthetic", "--training.device=cpu", "--training.dtype=float32",
       "--training.global_batch_size=1", "--training.seq_len=128", "--training.steps=4",
       "--lr_scheduler.warmup_steps=0", "--eval.interval=0", "--eval.windows=1"]
# The 1.1B base: a Llama of llama-1b's shape that transformers makes (random weights), float32:
# the full run's own checkpoint would need a second copy of its 18 GiB of state on this machine.
MAKE_BIG_BASE = """import sys, torch, transformers
torch.manual_seed(0)
transformers.utils.logging.disable_progress_bar()
config = transformers.LlamaConfig(
    vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
    num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
    rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    tie_word_embeddings=False)
transformers.LlamaForCausalLM(config).save_pretrained(sys.argv[1])
"""


def row(label, kind, lines, done):
    """A row from the run's step metrics and its first `done:` line."""
    tps = stats.median_after_first(lines, lambda line: line["tokens_per_s"])
    state = lines[-1]["state_bytes"]
    loss = re.search(r"val_loss ([\d.]+ -> [\d.]+)", done).group(1)
    peak = re.search(r"peak RSS (\S+)", done).group(1)
    return markdown.row(label, kind, f"{state['grads'] / 2**20:,.1f} MiB",
                        f"{state['optimizer'] / 2**20:,.1f} MiB", f"{tps:,.0f}", peak, loss)


def run_row(ctx, label, kind, folder, *args):
    """Fine-tunes (train args) into folder and prints the row; a failure stops the table."""
    output = process.run([ctx.train, "train", *args, f"--job.dump_folder={ctx.path(folder)}",
                          "--metrics.log_interval=1"])
    lines = trainlog.step_metrics(ctx.path(folder, "metrics.jsonl"))
    print(row(label, kind, lines, trainlog.done_lines(output)[0]))


def run(ctx):
    print("LoRA against a full fine-tune (NOTE [LoRA]), 1 process, float32, from the same Hugging Face")
    print("base; tokens/s: median over the steps after the first; grads and optimizer: rank 0's state")
    print("bytes (metrics.jsonl); val_loss: before -> after. llama-tiny: docs/data.md's walk-through")
    print("(its base trained 300 steps, 200 steps of its SFT data, its two configs). llama-1b: TinyLlama's")
    print("shape (1.1B) on synthetic tokens, batch 1 x 128, 4 steps (its base: random weights from transformers)")
    print(markdown.header("model", "fine-tune", "grads", "optimizer state", "tokens/s", "peak RSS",
                          "val_loss"))
    process.run([ctx.train, "train", "configs/llama-tiny.toml", *tiny.ONE_PROCESS,
                 "--training.steps=300", "--checkpoint.interval=300",
                 f"--job.dump_folder={ctx.path('tiny-base')}"])
    process.run([ctx.train, "export", ctx.path("tiny-base", "checkpoints", "latest"), "-o",
                 ctx.path("tiny-base-hf"), "--format", "hf"], stderr=None)
    process.run(["python3", "scripts/sft_example.py", ctx.path("sft.jsonl")], stderr=None)
    process.run([ctx.train, "data", "prepare", ctx.path("sft.jsonl"), "--sft", "--template",
                 "configs/templates/chatml.toml", "-o", ctx.path("sft-tokens")], stderr=None)
    sft = [f"--data.path={ctx.path('sft-tokens')}", f"--checkpoint.load=hf:{ctx.path('tiny-base-hf')}",
           "--checkpoint.interval=0"]
    run_row(ctx, "llama-tiny (0.79M)", "full", "tiny-full", "configs/llama-tiny-sft.toml", *sft)
    run_row(ctx, "llama-tiny (0.79M)", "LoRA r 16, all 7 projections", "tiny-lora",
            "configs/llama-tiny-sft-lora.toml", *sft)
    run_row(ctx, "llama-1b (1.1B)", "full", "big-full", *BIG, "--checkpoint.interval=0")
    process.run([torch_python(), "-c", MAKE_BIG_BASE, ctx.path("big-base-hf")], stderr=None)
    run_row(ctx, "llama-1b (1.1B)", "LoRA r 16, all 7 projections", "big-lora", *BIG,
            f"--checkpoint.load=hf:{ctx.path('big-base-hf')}", "--checkpoint.interval=0", *LORA_ALL)
    print()

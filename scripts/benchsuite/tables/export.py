"""export: a 125M-parameter Llama checkpoint exported as a Hugging Face folder in float32 and
bfloat16: tensors, bytes, seconds, MB/s and the exporter's peak RSS."""
import re

from benchsuite import markdown, process

_EXPORTED = re.compile(r".*: ([0-9]+) tensors, ([^ ]+) in .* files?, ([^ ]+) \(([0-9]+) MB/s\), "
                       r"peak RSS (.*)")
LLAMA_125M = ["--data.source=synthetic", "--model.vocab_size=32000", "--model.n_embd=768",
              "--model.n_layer=12", "--model.n_head=12", "--model.n_kv_head=4",
              "--model.intermediate_size=2048", "--training.global_batch_size=2",
              "--training.steps=1", "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=",
              "--eval.windows=1", "--checkpoint.interval=1"]


def row(dtype, line):
    """The row of an `exported ...` line (the line itself when it is no such line)."""
    m = _EXPORTED.match(line)
    return markdown.row(dtype, *m.groups()) if m else line


def run(ctx):
    print()
    print("export --format hf: a Llama of 125M parameters (12 layers, 768 hidden, 32000 vocabulary,")
    print("untied), one float32 training step saved sharded on 1 process, then exported")
    folder = ctx.path("export")
    process.run([ctx.train, "train", "configs/llama-tiny.toml", f"--job.dump_folder={folder}", *LLAMA_125M])
    print(markdown.header("dtype", "tensors", "bytes", "seconds", "MB/s", "peak RSS"))
    for dtype in ("float32", "bfloat16"):
        line = process.run([ctx.train, "export", f"{folder}/checkpoints/latest", "-o",
                    ctx.path(f"hf-{dtype}"), "--format", "hf", "--dtype", dtype], stderr=None)
        print(row(dtype, line.rstrip("\n")))


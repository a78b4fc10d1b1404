"""recompute: activation checkpointing none / selective / full on 1 process for gpt-tiny and a
GPT of 8 blocks, C = 256, T = 512: activation bytes, median step time, each against none, peak RSS."""
from benchsuite import markdown, stats, trainlog
from benchsuite.tables import tiny

MODES = ("none", "selective", "full")
MODELS = (("gpt-tiny", 30, []),
          ("8x256,T512", 8, ["--model.n_layer=8", "--model.n_embd=256", "--model.n_head=8",
                             "--model.block_size=512", "--training.seq_len=512",
                             "--training.global_batch_size=8"]))


def figures(lines):
    """(activation bytes of the last step, median ms a step after the first) of metrics lines."""
    return (lines[-1]["state_bytes"]["activations"],
            stats.median_after_first(lines, lambda line: line["step_time_s"]) * 1e3)


def row(label, mode, act, ms, base_act, base_ms, peak):
    """A row from this mode's figures and those of mode none."""
    return markdown.row(label, mode, markdown.mib(act), f"{act / base_act:.2f}", f"{ms:.0f}",
                        f"{ms / base_ms:.2f}", peak)


def run(ctx):
    print()
    print("activation checkpointing: 1 process, float32, dropout 0.1; activations: bytes the step's")
    print("forwards keep for the backward, as metrics.jsonl reports them (NOTE [Activation bytes]);")
    print("step time: median over the steps after the first")
    print(markdown.header("model", "recompute", "activations", "vs none", "step ms", "vs none",
                          "peak RSS"))
    for label, steps, overrides in MODELS:
        base = None
        for mode in MODES:
            folder = f"recompute-{label}-{mode}"
            output = tiny.train(ctx, folder, steps, *tiny.ONE_PROCESS, "--model.dropout=0.1",
                                f"--training.activation_checkpoint={mode}", *overrides,
                                windows=1, log_interval=1)
            act, ms = figures(trainlog.step_metrics(ctx.path(folder, "metrics.jsonl")))
            base = base or (act, ms)
            print(row(label, mode, act, ms, *base, trainlog.peak_rss(output)))

"""fused: gpt-tiny's model at T = 128 on 1 process at vocabularies 256 and 50,304 with the fused
LM loss and the fused projections each on and off: tokens/s (3 alternating rounds), activation
bytes, peak RSS."""
import statistics

from benchsuite import markdown, stats, trainlog
from benchsuite.tables import tiny

VOCABS = (256, 50304)
VARIANTS = (("true", "true"), ("true", "false"), ("false", "true"), ("false", "false"))
ROUNDS = 3
TOKENS_A_STEP = 16 * 128


def round_figures(lines):
    """(tokens/s from the median step time after the first, the last step's activation bytes)."""
    ms = stats.median_after_first(lines, lambda line: line["step_time_s"])
    return TOKENS_A_STEP / ms, lines[-1]["state_bytes"]["activations"]


def rows(vocab, figures):
    """The rows of a vocabulary: figures maps each variant (loss, projections) to (tokens/s of
    each round, activation bytes, peak RSS text)."""
    base_tps, base_act, _ = figures[("false", "false")]
    base = statistics.median(base_tps)
    for variant in VARIANTS:
        tps, act, peak = figures[variant]
        t, lo, hi = stats.median_min_max(tps)
        yield markdown.row(f"{vocab:,}", *variant, f"{t:,.0f}", f"{lo:,.0f}-{hi:,.0f}",
                           f"{t / base:.2f}x", markdown.mib(act, 1), f"{act / base_act:.2f}", peak)


def run_variant(ctx, vocab, loss, proj, rnd):
    """One round of a variant: (tokens/s, activation bytes, peak RSS text)."""
    folder = f"fused-{vocab}-{loss}-{proj}-{rnd}"
    output = tiny.train(ctx, folder, 12, "--checkpoint.interval=0", *tiny.ONE_PROCESS,
                        "--model.block_size=128", "--training.seq_len=128",
                        f"--model.vocab_size={vocab}", "--data.source=synthetic",
                        f"--training.fused_loss={loss}", f"--training.fused_projections={proj}",
                        windows=1, log_interval=1)
    tps, act = round_figures(trainlog.step_metrics(ctx.path(folder, "metrics.jsonl")))
    return tps, act, trainlog.peak_rss(output)


def run(ctx):
    print()
    print("fused LM loss and projections (NOTE [Fused LM loss], NOTE [Fused projections]): gpt-tiny's")
    print("model (4 blocks, C = 128, T = 128, 16 sequences a step, float32) on 1 process at its byte")
    print("vocabulary (256) and at GPT-2's (50,304), each switch on and off; tokens/s: median (min-max)")
    print("of 3 rounds that run every row in turn, each the median over the steps after the first;")
    print("activations: the last step's (metrics.jsonl, NOTE [Activation bytes])")
    print(markdown.header("vocab", "fused loss", "fused projections", "tokens/s", "min-max",
                          "vs both off", "activations", "vs both off", "peak RSS"))
    for vocab in VOCABS:
        figures = {v: ([], 0, "") for v in VARIANTS}
        for rnd in range(1, ROUNDS + 1):
            for variant in VARIANTS:
                tps, act, peak = run_variant(ctx, vocab, *variant, rnd)
                figures[variant] = (figures[variant][0] + [tps], act, peak)
        for line in rows(vocab, figures):
            print(line)

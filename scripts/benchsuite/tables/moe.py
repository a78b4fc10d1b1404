"""moe: mixtral-tiny (8 experts, top-2) against the dense llama of its active parameters on 1
process, dp = 2 and (MoE) dp = 2 with ep = 2: tokens/s, rank 0's parameter bytes, its ep and dp
bytes a step, peak RSS."""
from benchsuite import markdown, stats, trainlog
from benchsuite.tables import tiny

DENSE = ("dense llama (SwiGLU 344)", "configs/llama-tiny.toml", ["--parallel.plan=llama/dp-only"])
MOE = ("MoE 8 x 172, top-2", "configs/mixtral-tiny.toml",
       ["--model.num_experts=8", "--model.experts_per_token=2"])
# mixtral-tiny.toml sets ep = 2: the rows without expert parallelism say ep = 1.
ROWS = ((DENSE, "1 process", ["--parallel.dp=1"]),
        (MOE, "1 process", ["--parallel.dp=1", "--parallel.ep=1"]),
        (DENSE, "dp 2", ["--parallel.dp=2"]),
        (MOE, "dp 2", ["--parallel.dp=2", "--parallel.ep=1"]),
        (MOE, "dp 2, ep 2", ["--parallel.dp=2", "--parallel.ep=2"]))


def row(label, layout, lines, peak):
    """A row from the run's step metrics and peak RSS text."""
    tps = stats.median_after_first(lines, lambda line: line["tokens_per_s"])
    comm = lines[-1].get("comm_bytes", {})
    return markdown.row(label, layout, f"{tps:,.0f}", markdown.mib(lines[-1]["state_bytes"]["params"]),
                        f"{comm.get('ep', 0):,}", f"{comm.get('dp', 0):,}", peak)


def run(ctx):
    print()
    print("mixture of experts: mixtral-tiny with 8 experts, top-2 (4 layers, C = 128, each expert a")
    print("SwiGLU of 172) against the dense llama-tiny of the same active parameters (a SwiGLU of 344),")
    print("tp = 1, float32, 40 steps of 16 x 64 tokens; tokens/s: median over the steps after the first;")
    print("params: rank 0's parameter bytes; ep and dp bytes: rank 0's in the last step (metrics.jsonl)")
    print(markdown.header("model", "layout", "tokens/s", "params", "ep bytes/step", "dp bytes/step",
                          "peak RSS"))
    for (label, config, model), layout, parallel in ROWS:
        folder = f"moe-{label}-{layout.replace(' ', '')}"
        output = tiny.train(ctx, folder, 40, "--parallel.tp=1", *model, *parallel, windows=1,
                            log_interval=1, config=config)
        lines = trainlog.step_metrics(ctx.path(folder, "metrics.jsonl"))
        print(row(label, layout, lines, trainlog.peak_rss(output)))

"""muon and muon-cost: Muon against AdamW on gpt-tiny's model at MUON_WIDTHS, a learning-rate
sweep and seeds (scripts/lib/muon_table.py makes the tables), and the cost of its step."""
import os
import sys

from benchsuite import process
from benchsuite.tables import tiny

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "lib"))
import muon_table  # noqa: E402  (scripts/lib is no package)

MUON_TABLE = muon_table.__file__
OPTIMIZERS = ("adamw", "muon")
SWEEP = ("1e-3", "3e-3", "1e-2")
TOKENS_A_STEP = 1024
COST_ROUNDS = 3


def widths(ctx):
    """MUON_WIDTHS (default `128 256`), a list of n_embd separated by spaces."""
    return ctx.env.get("MUON_WIDTHS") or "128 256"


def train(ctx, folder, width, optimizer, *overrides):
    """One run of gpt-tiny's model at n_embd width, its output in the scratch folder's
    folder.log."""
    process.run_to_file([ctx.train, "train", tiny.CONFIG, *tiny.ONE_PROCESS,
                         f"--model.n_embd={width}", f"--optimizer.name={optimizer}", *overrides,
                         "--checkpoint.interval=0", f"--job.dump_folder={ctx.path(folder)}"],
                        ctx.path(folder + ".log"))


def next_lr(ctx, width, optimizer, choose):
    """muon_table's choice (best_lr or edge) over the runs so far."""
    return choose(muon_table.runs(ctx.out), int(width), optimizer)


def sweep(ctx, width, optimizer, steps):
    """seed 1 at each rate of SWEEP and past the sweep's edge while the best is on it, then
    seeds 2 and 3 at the best rate."""
    def run_lr(lr, seed):
        """One run at lr and seed."""
        train(ctx, f"muon-w{width}-{optimizer}_{lr}_{seed}", width, optimizer,
              f"--optimizer.lr={lr}", f"--training.seed={seed}", f"--training.steps={steps}",
              "--eval.interval=50", "--eval.windows=8", "--metrics.log_interval=50")
    for lr in SWEEP:
        run_lr(lr, 1)
    while edge := next_lr(ctx, width, optimizer, muon_table.edge):
        run_lr(edge, 1)
    best = next_lr(ctx, width, optimizer, muon_table.best_lr)
    for seed in (2, 3):
        run_lr(best, seed)


def run(ctx):
    steps = ctx.env.get("MUON_STEPS") or "500"
    print(f"muon vs adamw: configs/gpt-tiny.toml's model at n_embd = {widths(ctx)} on fortunes, 1 process,")
    print(f"float32, {steps} steps of 16 x 64 tokens, cosine to 0.1 of the lr, validation every 50 steps")
    print("(8 windows)")
    for width in widths(ctx).split():
        for optimizer in OPTIMIZERS:
            sweep(ctx, width, optimizer, steps)
    # Debian's python3 has matplotlib (scripts/setup.sh); another first on PATH may not.
    plot_python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"
    print(process.run([plot_python, MUON_TABLE, "table", ctx.out, str(TOKENS_A_STEP),
                       ctx.env.get("MUON_PNG") or "docs/muon.png"], stderr=None), end="")
    print()


def run_cost(ctx):
    """The muon-cost table."""
    print("muon's step against adamw's: the same models, 1 process, float32, 60 steps of 16 x 64 tokens,")
    print("3 alternating rounds; the median over steps 11-60 of each round, then over the rounds")
    for rnd in range(1, COST_ROUNDS + 1):
        for width in widths(ctx).split():
            for optimizer in OPTIMIZERS:
                train(ctx, f"cost-w{width}-{optimizer}_{rnd}", width, optimizer,
                      "--training.steps=60", "--eval.interval=0", "--eval.windows=1",
                      "--metrics.log_interval=1")
    print(process.run([sys.executable, MUON_TABLE, "cost", ctx.out], stderr=None), end="")
    print()

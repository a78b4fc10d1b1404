"""gpt-tiny training runs that the tables share: configs/gpt-tiny.toml with no evaluation."""
from benchsuite.process import run

CONFIG = "configs/gpt-tiny.toml"
# 1 process, no mesh.
ONE_PROCESS = ["--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="]


def train(ctx, folder, steps, *overrides, windows=4, log_interval=None, config=CONFIG, check=True):
    """Trains config for steps into the scratch folder's folder (no evaluation but the last,
    of windows windows; metrics every log_interval steps, default steps) and returns the output,
    standard error included."""
    return run([ctx.train, "train", config, f"--job.dump_folder={ctx.path(folder)}",
                f"--training.steps={steps}", "--eval.interval=0", f"--eval.windows={windows}",
                f"--metrics.log_interval={log_interval or steps}", *overrides], check=check)

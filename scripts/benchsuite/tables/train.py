"""train: training throughput of gpt-tiny (float32, 60 steps) on 1 process and on dp=2 x tp=2."""
from benchsuite import trainlog
from benchsuite.tables import tiny

LAYOUTS = (("1 process", "single", tiny.ONE_PROCESS),
           ("dp=2 x tp=2 megatron-sp", "dp2tp2", []),
           ("dp=2 x tp=2 megatron-tp", "dp2tp2tp", ["--parallel.plan=gpt/megatron-tp"]))


def line(layout, result):
    """A row: the layout, then what the run's `done:` line says."""
    return f"{layout:<24} {result}"


def run(ctx):
    print("training throughput: configs/gpt-tiny.toml, float32, 60 steps (tokens/s after the first step)")
    print(line("layout", "result"))
    for layout, folder, overrides in LAYOUTS:
        output = tiny.train(ctx, folder, 60, *overrides, check=False)
        print(line(layout, trainlog.summary(output)))
    print()

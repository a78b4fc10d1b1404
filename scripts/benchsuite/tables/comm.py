"""comm: collectives over every mesh dim (`vescale-train comm bench`) on 2 and 4 processes."""
from benchsuite.process import run_quiet


def run(ctx):
    for mesh in ([], ["--mesh", "pp=1,dp=2,tp=2"]):
        nproc = "4" if mesh else "2"
        print(run_quiet([ctx.train, "comm", "bench", "--nproc", nproc, *mesh, *ctx.sizes]), end="")
        print()

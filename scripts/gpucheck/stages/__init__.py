"""One module a stage, each with run(check); STAGES maps the names --stages takes to them."""
from gpucheck.stages import bench, build, kernels, parity, profile, ranks

STAGES = {"build": build.run, "parity": parity.run, "ranks": ranks.run, "kernels": kernels.run,
          "bench": bench.run, "profile": profile.run}

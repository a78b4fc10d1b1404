"""What every table runs with: the binaries, the scratch folder, the environment."""
import dataclasses
import os


@dataclasses.dataclass
class Context:
    """The binaries (VESCALE_TRAIN, VESCALE_BENCH_PLAIN, VESCALE_BENCH_FLIGHT,
    VESCALE_TRAIN_WHEEL, each defaulting to its build folder), comm bench's arguments, the
    scratch folder out, and the environment the tables read their settings from."""
    train: str
    plain: str
    flight: str
    wheel_train: str
    sizes: list
    out: str
    env: dict

    def path(self, *parts):
        """A path under the scratch folder."""
        return os.path.join(self.out, *parts)


def from_env(env, argv, out):
    """The context of a run: env is the environment (os.environ), argv the arguments (comm
    bench's, default --sizes 1K,64K,1M,16M), out the scratch folder."""
    build = env.get("BUILD_DIR") or "build"
    return Context(
        train=env.get("VESCALE_TRAIN") or f"{build}/vescale-train",
        plain=env.get("VESCALE_BENCH_PLAIN") or f"{build}/vescale-bench-plain",
        flight=env.get("VESCALE_BENCH_FLIGHT") or f"{build}/vescale-bench-flight",
        wheel_train=env.get("VESCALE_TRAIN_WHEEL") or "build-wheel/vescale-train",
        sizes=list(argv) or ["--sizes", "1K,64K,1M,16M"],
        out=out,
        env=dict(env))

"""The command line: --cpu, --stages, --out, -h/--help; a wrong option is a UsageError (exit 2)."""
import os
import shutil
from dataclasses import dataclass

# Every stage, in the order a call runs them.
STAGE_NAMES = ("build", "parity", "ranks", "kernels", "bench", "profile")


class UsageError(Exception):
    """A wrong option or stage: the message, then exit status 2."""


@dataclass
class Options:
    mode: str = "gpu"  # "gpu", or "cpu" under --cpu
    stages: str = ",".join(STAGE_NAMES)  # as given: the header's log line prints it so
    out_dir: str = ""  # as given; "" for a fresh temporary folder
    help: bool = False  # -h or --help came before any wrong option

    def wanted(self, stage):
        """Whether --stages names `stage`."""
        return stage in self.stages.split(",")


def parse(argv):
    """Options from argv (the arguments after the script's name), checked in order as the
    shell's loop did: -h stops at once, a wrong option or stage raises UsageError."""
    options = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--cpu":
            options.mode = "cpu"
        elif arg in ("--stages", "--out"):
            if not args:
                raise UsageError(f"{arg} needs a value (see --help)")
            value = args.pop(0)
            if arg == "--stages":
                options.stages = value
            else:
                options.out_dir = value
        elif arg.startswith("--stages="):
            options.stages = arg.split("=", 1)[1]
        elif arg.startswith("--out="):
            options.out_dir = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            options.help = True
            return options
        else:
            raise UsageError(f"unknown option {arg} (see --help)")
    for stage in options.stages.replace(",", " ").split():
        if stage not in STAGE_NAMES:
            raise UsageError(f"unknown stage '{stage}' ({', '.join(STAGE_NAMES)})")
    return options


def from_caller(path, caller_dir):
    """`path` as the caller meant it: relative to the folder they ran the script from."""
    return path if path.startswith("/") else os.path.join(caller_dir, path)


def binary_path(mode, env, caller_dir):
    """vescale-train's path: VESCALE_TRAIN (a path from where the caller stands, or a name on
    PATH), else the build's: build-cuda/ on a GPU, ${BUILD_DIR:-build}/ under --cpu."""
    given = env.get("VESCALE_TRAIN", "")
    if not given:
        folder = "build-cuda" if mode == "gpu" else env.get("BUILD_DIR") or "build"
        return f"{folder}/vescale-train"
    if "/" in given:
        return from_caller(given, caller_dir)
    return shutil.which(given) or given

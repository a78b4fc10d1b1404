"""The command of a peers row: a peer (Python PyTorch, the plain LibTorch loop) or vescale-train
on a layout, all training the same GPT."""
import dataclasses

PEER = "bench/peers/gpt_torch.py"
DP2 = ["--parallel.dp=2", "--parallel.tp=1", "--parallel.plan=gpt/dp-only"]
TP2 = ["--parallel.dp=1", "--parallel.tp=2", "--parallel.plan=gpt/megatron-sp"]


@dataclasses.dataclass
class Programs:
    """What the rows run: Debian's python (PyTorch 1.13), today's PyTorch's python, the plain
    loop, vescale-train and vescale-train built on the wheel's LibTorch."""
    system_python: str
    torch_python: str
    plain: str
    train: str
    wheel_train: str


def gpt_args(steps, dtype=None):
    """The job every row trains: gpt-tiny at seq_len = block_size = 128 for steps steps (in
    dtype, when given)."""
    return ["configs/gpt-tiny.toml", "--training.seq_len=128", "--model.block_size=128",
            f"--training.steps={steps}", *([f"--training.dtype={dtype}"] if dtype else [])]


def command(row, programs, steps, py_args, dump_folder):
    """The command of row: a peer (py1, py1-foreach, ddp on Debian's PyTorch; eager, compile,
    ddp-now, fsdp, dtensor-tp on today's; plain) or vescale-train (vs1, dp2, zero3, tp2),
    `@bf16` at its end in bfloat16, `wheel-` before it on the wheel's LibTorch. py_args: Debian's
    peer's arguments (PEER_PY_ARGS); dump_folder: vescale-train's."""
    dtype, train = "float32", programs.train
    if row.endswith("@bf16"):
        row, dtype = row[:-len("@bf16")], "bfloat16"
    if row.startswith("wheel-"):
        row, train = row[len("wheel-"):], programs.wheel_train
    args = gpt_args(steps, dtype)
    old = [programs.system_python, PEER, *args]
    now = [programs.torch_python, PEER, *args, "--foreach"]
    vs = [train, "train", *args, f"--job.dump_folder={dump_folder}", "--eval.interval=0",
          "--eval.windows=1", f"--metrics.log_interval={steps}", "--checkpoint.interval=0"]
    return {
        "py1": [*old, *py_args.split()],
        "py1-foreach": [*old, "--foreach"],
        "ddp": [*old, "--nproc", "2", *py_args.split()],
        "eager": now,
        "compile": [*now, "--compile"],
        "ddp-now": [*now, "--nproc", "2"],
        "fsdp": [*now, "--nproc", "2", "--fsdp"],
        "dtensor-tp": [*now, "--nproc", "2", "--tp"],
        "plain": [programs.plain, *args],
        "vs1": [*vs, "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="],
        "dp2": [*vs, *DP2],
        "zero3": [*vs, *DP2, "--parallel.zero=3"],
        "tp2": [*vs, *TP2],
    }[row]

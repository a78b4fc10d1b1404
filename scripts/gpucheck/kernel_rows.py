"""NOTE [GPU-verified]: the kernel table's rows that the passing device-side runs took (their
`[kernels]` lines), and for each CUDA row of the binary (its --version) whether one of them took
it. On a GPU a row that the binary says is "not yet run on a GPU" and a passing run took is
verified now: the line to write into its row is printed."""
import re

TOOK = re.compile(r".*\[kernels\] rank 0 took: (.*)")
CUDA_ROW = re.compile(r"^  [^:]+: (.+): CUDA")  # greedy: at::linear has colons
UNVERIFIED = "not yet run on a GPU"


def is_device_side(run):
    """Whether parity run `run` is a device-side one (dev64, llama_devbf16, ...)."""
    return run.startswith("dev") or "_dev" in run


def taken(log_texts):
    """The sorted, distinct kernel rows that the logs' `[kernels] rank 0 took:` lines name."""
    rows = set()
    for text in log_texts:
        for line in text.splitlines():
            found = TOOK.match(line)
            if found:
                rows.update(r.lstrip(" ") for r in found.group(1).split(","))
    return sorted(rows - {""})


def cuda_rows(version_text):
    """(name, state) of each CUDA row that `vescale-train --version` lists."""
    rows = []
    for line in version_text.splitlines():
        found = CUDA_ROW.match(line)
        if found:
            rows.append((found.group(1), re.sub(r".*CUDA, ", "", line, count=1)))
    return rows


def listed(names):
    """Names as the table lists them: ", " between, "none" for none."""
    return ",".join(names).replace(",", ", ") if names else "none"


def lines(mode, taken_rows, rows, today="", gpu=""):
    """The table's kernel lines for `mode` from the rows taken and the binary's CUDA rows."""
    side = "cuda" if mode == "gpu" else "cuda*"
    out = [f"kernels: rows the passing {side} runs took: {listed(taken_rows)}"]
    verified, verified_now, missed = [], [], []
    joined = f", {', '.join(taken_rows)}, "  # a name with ", " in it matches as the shell's did
    for name, state in rows:
        if f", {name}, " not in joined:
            missed.append(name)
        elif UNVERIFIED in state:
            verified_now.append(name)
        else:
            verified.append(name)
    if mode != "gpu":
        return out + [f"kernels: CUDA rows (--cpu: none taken here): {listed(missed)}"]
    hint = (f' (write {{"{today}", "{gpu}"}} as their gpu_run in lib/kernels/kernel_table.cpp)'
            if verified_now else "")
    return out + [f"kernels: CUDA rows verified again: {listed(verified)}",
                  f"kernels: CUDA rows verified for the first time: {listed(verified_now)}{hint}",
                  f"kernels: CUDA rows no passing run took: {listed(missed)}"]

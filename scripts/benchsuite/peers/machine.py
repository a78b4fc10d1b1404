"""What the peers table says of the machine and the builds it ran on."""
import datetime
import os
import re

from benchsuite import process


def cpu_model(lscpu_output):
    """lscpu's `Model name:`."""
    m = re.search(r"^Model name: *(.*)$", lscpu_output, re.MULTILINE)
    return m.group(1) if m else ""


def has_bf16(cpuinfo):
    """Whether /proc/cpuinfo's flags name AVX512-BF16 or AMX-BF16."""
    return re.search(r"\b(avx512_bf16|amx_bf16)\b", cpuinfo) is not None


def blas_core(train_output):
    """The OpenBLAS kernels vescale-train's threads line names (`, kernels X (OpenBLAS
    picked ...`), or ''."""
    m = re.search(r", kernels ([A-Za-z0-9]*) \(OpenBLAS picked", train_output)
    return m.group(1) if m else ""


def describe(torch_python, steps, rounds):
    """The lines above the peers table."""
    torch_now = process.run([torch_python, "-c", "import torch; print(torch.__version__)"],
                            stderr=None).strip()
    libtorch = process.run_quiet(["dpkg-query", "-W", "-f", "${Version}", "libtorch1.13"],
                                 check=False) or "1.13"
    model = cpu_model(process.run(["lscpu"], stderr=None))
    return [
        "peers: the same GPT (configs/gpt-tiny.toml, seq_len = block_size = 128: 4 layers, C = 128, 4 heads,",
        f"  vocab 256, global batch 16, AdamW, clip 1.0, fortunes), {steps} steps; tokens/s after the first step and the",
        f"  peak RSS of the largest process, median (min-max) of {rounds} interleaved rounds; machine: {model},",
        f"  {len(os.sched_getaffinity(0))} cores, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}; torch {torch_now} (PyPI wheel: MKL, oneDNN); vescale-train on Debian's LibTorch",
        f"  {libtorch} (OpenBLAS) and, '(wheel LibTorch)', on the wheel's; peers' threads: the fastest of",
        "  their candidates (threads column); vescale-train with its defaults (no thread variables set)",
    ]

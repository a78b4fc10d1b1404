"""Helpers for end-to-end tests: the real vescale-train binary on real processes."""
import json
import os
import socket
import subprocess
import tempfile
import unittest

BINARY = os.environ.get("VESCALE_TRAIN", "vescale-train")
# Debian's python3 with h5py and numpy (the interpreter running the tests may be another one).
SYSTEM_PYTHON = "/usr/bin/python3"

# A GPT small enough that a process trains a step in a blink, on the synthetic task; tests append
# the sections they need.
TINY_GPT = """
[model]
name = "gpt"
vocab_size = 32
vocab_multiple = 8
block_size = 16
n_layer = 2
n_head = 4
n_embd = 16
[data]
source = "synthetic"
[eval]
interval = 0
windows = 1
"""

# TINY_GPT trained 2 steps of 4 sequences of 16 tokens, saving its last step.
TINY_GPT_TWO_STEPS = TINY_GPT + """
[training]
steps = 2
global_batch_size = 4
seq_len = 16
[checkpoint]
interval = 2
"""


def write_config(folder, text):
    """`text` as folder/job.toml; returns the path."""
    path = os.path.join(folder, "job.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def tokenizer_texts(module, prefix, hostile):
    """For a tokenizer test class: skips unless Debian's python3 `module` is there, then makes a
    temporary folder with the fortunes corpus and the test's hostile bytes in it. Returns
    (folder, corpus path, hostile path)."""
    probe = subprocess.run([SYSTEM_PYTHON, "-c", f"import {module}"], capture_output=True)
    if probe.returncode != 0:
        raise unittest.SkipTest(f"Debian's python3-{module} is not installed")
    tmp = tempfile.mkdtemp(prefix=prefix)
    corpus = os.path.join(tmp, "fortunes.txt")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([os.path.join(root, "scripts", "prepare_fortunes.sh"), corpus], check=True,
                   capture_output=True)
    path = os.path.join(tmp, "hostile.txt")
    with open(path, "wb") as f:
        f.write(hostile)
    return tmp, corpus, path


def token_stream(folder):
    """The token ids of `data prepare`'s folder: train.bin then val.bin, in meta.json's width."""
    import struct
    with open(os.path.join(folder, "meta.json")) as f:
        code = {"uint16": "H", "uint32": "I"}[json.load(f)["dtype"]]
    ids = []
    for name in ("train.bin", "val.bin"):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        ids += struct.unpack(f"<{len(data) // struct.calcsize(code)}{code}", data)
    return ids


def first_difference(got, expected):
    """None where the id lists are equal, else where they part (unittest's diff of lists of a
    million ids would take minutes)."""
    if list(got) == list(expected):
        return None
    i = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b),
             min(len(got), len(expected)))
    return (f"{len(got)} ids, expected {len(expected)}; they part at {i}: "
            f"{list(got[max(0, i - 3):i + 5])} where {list(expected[max(0, i - 3):i + 5])}")


def run(*args, timeout=300, env=None):
    """Runs vescale-train with `args`; returns the CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def parse_table(stdout, first_column="dim"):
    """Rows of a whitespace table after its header line (the one starting with `first_column`)."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [first_column]:
            header = line.split()
            return [l.split() for l in lines[i + 1:] if l.strip()], header
    raise AssertionError(f"no table with a '{first_column}' header in:\n{stdout}")


def metrics_lines(folder):
    """The JSON objects of `folder`/metrics.jsonl, one per line."""
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def train_losses(config, folder, *args, timeout=600):
    """Runs `vescale-train train CONFIG` into `folder`; returns the per-step losses of its
    metrics.jsonl (run with --metrics.log_interval=1). A stated MFU peak spares each rank the
    0.2 s matmul timing that finds the CPU's (NOTE [MFU peak]); `args` may set another."""
    result = run("train", config, f"--job.dump_folder={folder}", "--metrics.peak_flops=1e12",
                 *args, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"train {args} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return [m["loss"] for m in metrics_lines(folder)]


def max_relative(a, b):
    """The largest |a - b| / |b| over paired values."""
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def system_python_value(script):
    """Runs `script` under SYSTEM_PYTHON and returns the number it prints."""
    result = subprocess.run([SYSTEM_PYTHON, "-c", script], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return float(result.stdout)


# The system's Python, whose Debian python3-torch brings torchrun.
SYSTEM_PYTHON = "/usr/bin/python3"


def free_port():
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_missing():
    """Why torchrun cannot run here, or None when it can."""
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import torch.distributed.run"], capture_output=True)
    if probe.returncode != 0:
        return "Debian's python3-torch (torch.distributed.run) is not installed"
    # torch >= 2.4 asks for a libuv TCPStore, and torchrun's static rendezvous offers no way
    # around it: a torch built without libuv (Debian 13's) cannot run torchrun at all.
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import torch.distributed as d; "
                            "d.TCPStore('127.0.0.1', 0, 1, True, wait_for_workers=False)"],
                           capture_output=True, text=True, timeout=60)
    if "without libuv" in probe.stderr:
        return ("this system's torch was built without libuv, so its torchrun cannot create its "
                "TCPStore (" + probe.stderr.strip().splitlines()[-1] + ")")
    return None

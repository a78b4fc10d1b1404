"""The jobs this check writes into the logs folder: the parity runs' small GPT, Llama and Mixtral,
and --cpu's small bench GPT."""
import os

# Both jobs run on one rank on synthetic tokens.
ONE_RANK_SYNTHETIC = """\
[parallel]
dp = 1
tp = 1
[data]
source = "synthetic"
"""

PARITY_GPT = """\
# gpu-check's parity job: a small GPT with dropout (vescale's masks do not depend on the device)
[job]
name = "gpu-check-parity"
[model]
name = "gpt"
vocab_size = 256
block_size = 64
n_layer = 2
n_head = 4
n_embd = 64
dropout = 0.1
""" + ONE_RANK_SYNTHETIC + """\
[training]
steps = 20
global_batch_size = 8
seq_len = 64
seed = 3
[optimizer]
lr = 3e-3
[eval]
interval = 10
windows = 4
[metrics]
log_interval = 1
"""

# Each family's lines in place of the GPT's `name = "gpt"`, without dropout (neither family has
# it): Llama with grouped-query attention (2 key/value heads for 4); Mixtral with Llama's
# attention and each layer's MLP 4 SwiGLU experts, 2 a token (a float32 router).
PARITY_FAMILIES = {
    "llama": ("a small Llama", 'name = "llama"\nn_kv_head = 2'),
    "mixtral": ("a small Mixtral", 'name = "mixtral"\nn_kv_head = 2\nintermediate_size = 96\n'
                'num_experts = 4\nexperts_per_token = 2'),
}

SMALL_BENCH = """\
# gpu-check --cpu's bench job: a small GPT that a CPU steps in well under a second
[job]
name = "gpu-check-bench"
[model]
name = "gpt"
vocab_size = 256
block_size = 128
n_layer = 2
n_head = 4
n_embd = 128
dropout = 0.0
""" + ONE_RANK_SYNTHETIC + """\
[training]
steps = 6
global_batch_size = 4
seq_len = 128
seed = 1
device = "cpu"
dtype = "float32"
grad_clip = 1.0
[optimizer]
name = "adamw"
lr = 6e-4
beta2 = 0.95
weight_decay = 0.1
[eval]
interval = 0
windows = 1
[metrics]
log_interval = 1
"""


def parity_config(family):
    """The parity job's text for "gpt", "llama" or "mixtral"."""
    if family == "gpt":
        return PARITY_GPT
    what, model_lines = PARITY_FAMILIES[family]
    lines = []
    for line in PARITY_GPT.splitlines():
        if line.startswith("# gpu-check"):
            line = f"# gpu-check's parity job: {what}"
        elif line == 'name = "gpt"':
            line = model_lines
        elif line.startswith("dropout"):
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def write_parity_configs(logs):
    """logs/small.toml, llama.toml and mixtral.toml; returns {family: path}."""
    files = {"gpt": "small.toml", "llama": "llama.toml", "mixtral": "mixtral.toml"}
    return {family: write(os.path.join(logs, name), parity_config(family))
            for family, name in files.items()}


def bench_job(mode, logs):
    """The bench's and the profile's job: GPT-2 124M on a GPU; under --cpu a small GPT, written
    to logs/bench-small.toml."""
    if mode == "gpu":
        return "configs/gpt2-124m.toml"
    return write(os.path.join(logs, "bench-small.toml"), SMALL_BENCH)

"""The Pythons the tables run: Debian's (PyTorch 1.13, matplotlib) and today's PyTorch's."""

from benchsuite import process

# Debian's, with python3-torch 1.13: BENCH=peer-threads' peers, the byte-level BPE reference.
SYSTEM_PYTHON = "/usr/bin/python3"


def torch_python():
    """The python of python/requirements.txt (today's PyTorch, transformers): the last line of
    scripts/python-env.sh, which makes its environment the first time (progress on stderr)."""
    return process.run(["bash", "scripts/python-env.sh"], stderr=None).splitlines()[-1]

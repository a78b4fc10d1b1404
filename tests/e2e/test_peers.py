"""scripts/bench.sh's peers compute vescale-train's model: the Python PyTorch GPT (1 process and
DDP on 2; with today's PyTorch also FSDP2 and DTensor tensor parallelism on 2) and the plain
LibTorch loop, started from vescale-train's float64 checkpoint after step 1, train steps 2-4 on the
same batch and must give its losses, gradient norms and parameters.

The batch is the same because the train split is seq_len + 2 bytes long: every window starts at
0 whatever generator draws it (vescale-train's batches come from Philox, the peers' from torch).
VESCALE_TORCH_PYTHON names the python of today's PyTorch (scripts/python-env.sh; the wheel build's
ctest sets it): the FSDP2 and DTensor TP peers run there, and skip without it. The vocabulary pads
to 288 rows whether 1 or 2 ranks share it (vocab_multiple 144 x tp), so DTensor TP loads the same
checkpoint."""
import os
import random
import re
import shutil
import subprocess
import tempfile
import unittest

from common import SYSTEM_PYTHON, metrics_lines, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "bench", "peers", "gpt_torch.py")
PLAIN = os.environ.get("VESCALE_BENCH_PLAIN", "")
TORCH_PYTHON = os.environ.get("VESCALE_TORCH_PYTHON", "")
SEQ_LEN = 1024        # text data needs > 1024 train bytes: train split = SEQ_LEN + 2 = 1026;
                      # even, for the sequence parallelism of DTensor TP on 2
VAL_BYTES = 1100      # one validation window of SEQ_LEN + 1
STEPS = 4
CONFIG = f"""
[model]
name = "gpt"
vocab_size = 256
block_size = {SEQ_LEN}
n_layer = 2
n_head = 4
n_embd = 32
vocab_multiple = 144  # 288 rows on 1 rank and on 2: the padded logits are masked
[parallel]
dp = 1
tp = 1
plan = ""
[data]
source = "text"
val_fraction = {VAL_BYTES / (SEQ_LEN + 2 + VAL_BYTES) + 1e-5}
[training]
steps = {STEPS}
global_batch_size = 2
seq_len = {SEQ_LEN}
seed = 3
dtype = "float64"
grad_clip = 0.5
[optimizer]
name = "adamw"
lr = 3e-3
weight_decay = 0.1
[lr_scheduler]
warmup_steps = 2
decay = "cosine"
min_lr_ratio = 0.1
[eval]
windows = 1
"""

# h5 checkpoint -> raw float64 files <fqn>.bin, <fqn>.exp_avg.bin, <fqn>.exp_avg_sq.bin
TO_RAW = """
import h5py, numpy as np, os, sys
f = h5py.File(sys.argv[1], 'r'); out = sys.argv[2]
os.makedirs(out, exist_ok=True)
for name, d in f['model'].items():
    np.asarray(d[()], dtype='<f8').tofile(os.path.join(out, name + '.bin'))
for name, g in f['optimizer'].items():
    for state in ('exp_avg', 'exp_avg_sq'):
        np.asarray(g[state][()], dtype='<f8').tofile(os.path.join(out, f'{name}.{state}.bin'))
print(int(f['meta'].attrs['optimizer_steps']))
"""

# The largest |peer - vescale| over the parameters of a raw folder and a checkpoint.
COMPARE = """
import h5py, numpy as np, os, sys
f = h5py.File(sys.argv[1], 'r'); folder = sys.argv[2]
worst = 0.0
for name, d in f['model'].items():
    if name == 'lm_head.weight':
        continue
    ours = np.fromfile(os.path.join(folder, name + '.bin'), dtype='<f8').reshape(d.shape)
    worst = max(worst, float(np.max(np.abs(ours - d[()]))))
print(worst)
"""

STEP_LINE = re.compile(r"^step (\d+) loss (\S+) grad_norm (\S+)", re.M)


def relative(a, b):
    return abs(a - b) / abs(b)


class Peers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-peers-")
        rng = random.Random(7)
        words = "the quick brown fox jumps over a lazy dog while peers train the same model".split()
        text = " ".join(rng.choice(words) for _ in range(2000)).encode()
        cls.data = os.path.join(cls.tmp, "text.txt")
        with open(cls.data, "wb") as f:
            f.write(text[:SEQ_LEN + 2 + VAL_BYTES])
        cls.config = os.path.join(cls.tmp, "peers.toml")
        with open(cls.config, "w") as f:
            f.write(CONFIG.replace('source = "text"', f'source = "text"\npath = "{cls.data}"'))
        folder = os.path.join(cls.tmp, "vescale")
        result = run("train", cls.config, f"--job.dump_folder={folder}", "--checkpoint.format=merged",
                     "--checkpoint.interval=1", f"--checkpoint.keep={STEPS}",
                     "--metrics.log_interval=1")
        if result.returncode != 0:
            raise AssertionError(f"vescale-train failed:\n{result.stderr[-3000:]}")
        cls.metrics = {m["step"]: m for m in metrics_lines(folder)}
        ckpt = os.path.join(folder, "checkpoints", "step-{:06d}", "model.h5")
        cls.start = ckpt.format(1)
        cls.final = ckpt.format(STEPS)
        cls.raw = os.path.join(cls.tmp, "start")
        cls.start_step = int(cls.system_python(TO_RAW, cls.start, cls.raw))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def system_python(script, *args):
        result = subprocess.run([SYSTEM_PYTHON, "-c", script, *args], capture_output=True,
                                text=True, timeout=300)
        if result.returncode != 0:
            raise AssertionError(result.stderr)
        return result.stdout.strip()

    def check_peer(self, name, command):
        dump = os.path.join(self.tmp, name.replace(" ", "-"))
        result = subprocess.run([*command, self.config, f"--init={self.raw}",
                                 f"--start-step={self.start_step}", f"--dump={dump}", "--log-steps"],
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, f"{name} failed:\n{result.stderr[-3000:]}")
        steps = {int(s): (float(loss), float(norm)) for s, loss, norm in STEP_LINE.findall(result.stdout)}
        self.assertEqual(sorted(steps), list(range(self.start_step + 1, STEPS + 1)), result.stdout)
        loss_error = max(relative(loss, self.metrics[s]["loss"]) for s, (loss, _) in steps.items())
        norm_error = max(relative(norm, self.metrics[s]["grad_norm"]) for s, (_, norm) in steps.items())
        param_error = float(self.system_python(COMPARE, self.final, dump))
        print(f"{name}: steps {self.start_step + 1}-{STEPS} from vescale's step-{self.start_step} "
              f"checkpoint, float64: max relative loss error {loss_error:.3g}, grad norm "
              f"{norm_error:.3g}; parameters after step {STEPS}: max abs error {param_error:.3g}")
        self.assertLess(loss_error, 1e-10, name)
        self.assertLess(norm_error, 1e-10, name)
        self.assertLess(param_error, 1e-10, name)

    def test_clipping_is_active(self):
        norms = [self.metrics[s]["grad_norm"] for s in range(self.start_step + 1, STEPS + 1)]
        self.assertTrue(all(n > 0.5 for n in norms), f"grad_clip 0.5 never clips: {norms}")

    def test_python_one_process(self):
        self.check_peer("python 1 process", [SYSTEM_PYTHON, PEER])

    def test_python_one_process_additive_mask(self):
        self.check_peer("python 1 process additive mask",
                        [SYSTEM_PYTHON, PEER, "--attention=additive"])

    def test_python_ddp_two_processes(self):
        self.check_peer("python DDP 2 processes", [SYSTEM_PYTHON, PEER, "--nproc", "2"])

    @unittest.skipUnless(TORCH_PYTHON, "VESCALE_TORCH_PYTHON (today's PyTorch) is not set")
    def test_todays_torch_one_process(self):
        self.check_peer("torch today 1 process", [TORCH_PYTHON, PEER])

    @unittest.skipUnless(TORCH_PYTHON, "VESCALE_TORCH_PYTHON (today's PyTorch) is not set")
    def test_todays_torch_fsdp2_two_processes(self):
        self.check_peer("torch today FSDP2 2 processes", [TORCH_PYTHON, PEER, "--nproc", "2", "--fsdp"])

    @unittest.skipUnless(TORCH_PYTHON, "VESCALE_TORCH_PYTHON (today's PyTorch) is not set")
    def test_todays_torch_dtensor_tp_two_processes(self):
        self.check_peer("torch today DTensor TP 2 processes", [TORCH_PYTHON, PEER, "--nproc", "2", "--tp"])

    @unittest.skipUnless(PLAIN and os.path.exists(PLAIN), "vescale-bench-plain is not built")
    def test_plain_libtorch(self):
        self.check_peer("plain libtorch", [PLAIN])


if __name__ == "__main__":
    unittest.main()

"""NOTE [BLAS kernels]: where OpenBLAS picked kernels narrower than the CPU's vectors, `train`
starts again with the CPU's (the local launcher's workers inherit them), the threads line says
which and why, and float64 losses are those of OpenBLAS's own pick within 1e-12 (other kernels sum
in another order). VESCALE_BLAS_CORE=off keeps OpenBLAS's pick. On a CPU whose kernels OpenBLAS
picks rightly (CI's AMD machines: Zen) no choice is made and both runs must agree the same way."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from common import BINARY, metrics_lines, write_config

CONFIG = """
[model]
name = "gpt"
vocab_size = 256
block_size = 32
n_layer = 2
n_head = 4
n_embd = 64
[parallel]
dp = {dp}
tp = {tp}
plan = "{plan}"
[data]
source = "text"
path = "{text}"
[training]
steps = 8
global_batch_size = 8
seq_len = 32
seed = 3
dtype = "float64"
[optimizer]
name = "adamw"
lr = 3e-3
[checkpoint]
interval = 0
[eval]
interval = 0
[metrics]
log_interval = 1
peak_flops = 1e12
"""
THREADS = re.compile(r"threads: .*")


class BlasKernels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-blas-")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog; " * 300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train(self, name, mode, dp=1, tp=1, plan=""):
        folder = os.path.join(self.tmp, f"{name}-{mode}")
        config = write_config(self.tmp, CONFIG.format(dp=dp, tp=tp, plan=plan, text=self.text))
        env = dict(os.environ, VESCALE_BLAS_CORE=mode)
        env.pop("OPENBLAS_CORETYPE", None)  # OpenBLAS reads even an empty one
        done = subprocess.run([BINARY, "train", config, f"--job.dump_folder={folder}"], env=env,
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        threads = THREADS.search(done.stderr)
        self.assertIsNotNone(threads, done.stderr[-2000:])
        return [m["loss"] for m in metrics_lines(folder)], threads.group(0)

    def check_layout(self, name, **layout):
        chosen, chosen_line = self.train(name, "auto", **layout)
        own, own_line = self.train(name, "off", **layout)
        print(f"{name}: {chosen_line}\n{name}: {own_line}")
        self.assertEqual(len(chosen), 8)
        worst = max(abs(a - b) / abs(b) for a, b in zip(chosen, own))
        print(f"{name}: float64 losses, chosen kernels against OpenBLAS's pick: max relative "
              f"difference {worst:.2e}")
        self.assertLessEqual(worst, 1e-12)
        picked = re.search(r"kernels (\w+) \(OpenBLAS picked (\w+) on this ([\w-]+) CPU", chosen_line)
        if picked is None:
            # OpenBLAS's own pick fits this CPU (or the BLAS is not a DYNAMIC_ARCH OpenBLAS):
            # nothing was chosen, and off says nothing either.
            self.assertNotIn("VESCALE_BLAS_CORE=off)", own_line)
            print(f"{name}: OpenBLAS's own kernels fit this CPU: no choice made")
            return
        self.assertIn(f"NO_AFFINITY {picked.group(1)} ", chosen_line)  # OpenBLAS's own config
        self.assertIn(f"kernels {picked.group(2)}, OpenBLAS's pick on this {picked.group(3)} CPU, "
                      f"whose {picked.group(1)} kernels run faster (VESCALE_BLAS_CORE=off)", own_line)

    def test_one_process(self):
        self.check_layout("single")

    def test_the_launchers_workers_inherit_the_choice(self):
        self.check_layout("dp2", dp=2)

    def test_tensor_parallel(self):
        self.check_layout("tp2", tp=2, plan="gpt/megatron-tp")


if __name__ == "__main__":
    unittest.main()

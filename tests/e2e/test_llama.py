"""The llama family through the real binary on real processes: configs/llama-tiny.toml trains on
dp=2 x tp=2 in bf16 with a sharded checkpoint, which eval reads under another layout and merge
turns into one file of Hugging Face-named tensors; plan lint, plan schedule and plan auto take
the family."""
import os
import re
import shutil
import tempfile
import unittest

from common import SYSTEM_PYTHON, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "llama-tiny.toml")
SMALL = ["--data.source=synthetic", "--model.n_layer=2", "--model.n_embd=32",
         "--model.intermediate_size=48", "--model.vocab_size=64", "--model.vocab_multiple=16",
         "--training.seq_len=32", "--model.block_size=32", "--eval.windows=2"]


class Llama(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="vescale-llama-")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_trains_in_bf16_then_eval_and_merge_read_its_checkpoint(self):
        result = run("train", CONFIG, *SMALL, f"--job.dump_folder={self.folder}",
                     "--training.steps=4", "--training.dtype=bfloat16", "--checkpoint.interval=4",
                     "--metrics.log_interval=1", "--eval.interval=0", timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        trained = float(re.search(r"step 4/4 \|.*?\| val_loss ([0-9.]+)", result.stderr).group(1))
        checkpoint = os.path.join(self.folder, "checkpoints", "latest")
        # Another layout: one process, bf16, no plan.
        evaluated = run("eval", CONFIG, *SMALL, "--checkpoint", checkpoint,
                        "--training.dtype=bfloat16", "--parallel.dp=1", "--parallel.tp=1",
                        "--parallel.plan=", timeout=300)
        self.assertEqual(evaluated.returncode, 0, evaluated.stderr[-3000:])
        value = float(evaluated.stdout.split()[-1])
        print(f"llama bf16 dp2 x tp2: val_loss after training {trained}, eval on 1 process {value}")
        self.assertAlmostEqual(value, trained, delta=5e-4 * trained)  # the log rounds to 4 places
        merged = os.path.join(self.folder, "merged.h5")
        self.assertEqual(run("merge", checkpoint, "-o", merged, timeout=120).returncode, 0)
        names = run_python(f"import h5py; f = h5py.File({merged!r}); "
                           "f['model'].visit(print)")
        for name in ("model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight",
                     "model.layers.0.mlp.gate_proj.weight",
                     "model.layers.0.post_attention_layernorm.weight", "model.norm.weight",
                     "lm_head.weight"):
            self.assertIn(name, names.split())

    def test_plan_commands_take_the_family(self):
        lint = run("plan", "lint", CONFIG, *SMALL, timeout=120)
        self.assertEqual(lint.returncode, 0, lint.stderr)
        self.assertIn("ok: llama on tp=2 with plan llama/megatron-sp", lint.stdout)
        schedule = run("plan", "schedule", CONFIG, *SMALL, "--parallel.pp=2", "--parallel.dp=1",
                       "--parallel.microbatches=4", timeout=120)
        self.assertEqual(schedule.returncode, 0, schedule.stderr)
        self.assertIn("model.layers.1 .. head", schedule.stdout)
        auto = run("plan", "auto", CONFIG, *SMALL, "--nproc", "2", "--top", "3",
                   f'--job.dump_folder="{self.folder}"', timeout=300)
        self.assertEqual(auto.returncode, 0, auto.stderr[-3000:])
        self.assertRegex(auto.stdout, r"(?m)^best: pp=\d dp=\d tp=\d")


def run_python(script):
    import subprocess
    return subprocess.run([SYSTEM_PYTHON, "-c", script], check=True, capture_output=True,
                          text=True).stdout


if __name__ == "__main__":
    unittest.main()

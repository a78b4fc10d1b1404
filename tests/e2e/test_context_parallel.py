"""Context parallelism (parallel.cp) on real processes: float64 GPT (dropout 0.1) and Llama at a
sequence length of 256 give the 1-process losses and validation losses under cp2 x tp2 with
sequence parallelism and pp2 x cp2, and each rank sends the analytic ring volume over cp, the
figure plan lint states:
3 (cp - 1) key/value chunks per attention layer and micro-batch (forward: the keys and values
round the ring; backward: round again, with their gradients)."""
import os
import shutil
import tempfile
import unittest

import re

from common import max_relative, metrics_lines, run, train_losses

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")  # 2 blocks, width 32, 4 heads
LLAMA = os.path.join(ROOT, "configs", "llama-tiny.toml")

LONG = ("--training.seq_len=256", "--model.block_size=256", "--training.global_batch_size=4",
        "--training.dtype=float64", "--training.steps=4", "--metrics.log_interval=1",
        "--eval.interval=2", "--eval.windows=2", "--parallel.microbatches=2", "--parallel.dp=1", "--parallel.tp=1",
        "--parallel.plan=")
GPT_ARGS = LONG + ("--model.dropout=0.1",)
LLAMA_ARGS = LONG + ("--model.n_layer=2", "--model.n_embd=64", "--model.intermediate_size=96",
                     "--data.source=synthetic", "--model.vocab_size=96")


def ring_send_bytes(layers, microbatches, rows, seq_len, kv_width, cp, element=8):
    """What a rank sends over cp in one step: per attention layer and micro-batch its key and
    value chunk ([rows, seq_len / cp, kv_width] each) goes round 3 (cp - 1) times."""
    kv_pair = 2 * rows * (seq_len // cp) * kv_width * element
    return layers * microbatches * 3 * (cp - 1) * kv_pair


class ContextParallelOnProcesses(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-cp-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_job(self, config, name, *args):
        folder = os.path.join(self.tmp, name)
        losses = train_losses(config, folder, *args)
        lines = metrics_lines(folder)
        return losses, [m["val_loss"] for m in lines if "val_loss" in m], lines

    def check_layouts(self, config, args, layouts, kv_width, label):
        ref, ref_val, _ = self.run_job(config, label + "-ref", *args)
        for name, (layout, cp, tp, layers_here) in layouts.items():
            losses, val, lines = self.run_job(config, f"{label}-{name}", *args, *layout)
            err = max_relative(losses, ref)
            val_err = max_relative(val, ref_val)
            sent = lines[-1]["comm_bytes_by_kind"]["cp"]["send"]
            expected = ring_send_bytes(layers_here, 2, 2, 256, kv_width // tp, cp)
            # plan lint states the same figure before anything runs.
            lint = run("plan", "lint", config, *args, *layout)
            self.assertEqual(lint.returncode, 0, lint.stderr)
            stated = re.search(r"ring attention sends (\d+) B", lint.stdout)
            self.assertIsNotNone(stated, lint.stdout)
            self.assertEqual(int(stated.group(1)), expected, name)
            print(f"{label} {name}: {len(losses)} steps, loss error {err:.3g}, val_loss error "
                  f"{val_err:.3g}; rank 0 sent {sent} B over cp in the last step, formula "
                  f"{expected} B")
            self.assertEqual(len(losses), len(ref), name)
            self.assertEqual(len(val), len(ref_val), name)
            self.assertLessEqual(err, 1e-10, name)
            self.assertLessEqual(val_err, 1e-10, name)
            self.assertEqual(sent, expected, name)

    def test_gpt(self):
        self.check_layouts(GPT, GPT_ARGS, {
            "cp2xtp2-sp": (("--parallel.cp=2", "--parallel.tp=2",
                            "--parallel.plan=gpt/megatron-sp"), 2, 2, 2),
            "pp2xcp2": (("--parallel.pp=2", "--parallel.cp=2"), 2, 1, 1),
            "cp4": (("--parallel.cp=4",), 4, 1, 2),
        }, kv_width=32, label="gpt")

    def test_llama(self):
        # 4 query heads of 16 and 2 key/value heads: the ring moves the keys and values as
        # attention takes them, repeated to the 4 query heads (docs/limits.md), 64 wide.
        self.check_layouts(LLAMA, LLAMA_ARGS, {
            "cp2xtp2-sp": (("--parallel.cp=2", "--parallel.tp=2",
                            "--parallel.plan=llama/megatron-sp"), 2, 2, 2),
            "pp2xcp2": (("--parallel.pp=2", "--parallel.cp=2"), 2, 1, 1),
        }, kv_width=64, label="llama")


if __name__ == "__main__":
    unittest.main()

"""NOTE [Fused LM loss] end to end at GPT-2's vocabulary (50,304): the activation bytes a step's
metrics report (measured by the memory meter, NOTE [Activation bytes]) fall by at least 30% with
training.fused_loss, on 1 process and vocab-parallel on tp = 2, and the float32 losses stay those
of the unfused head."""
import os
import tempfile
import unittest

from common import TINY_GPT, metrics_lines, run, write_config

STEPS = 2


def train(folder, *overrides):
    config = write_config(folder, TINY_GPT + "[training]\nglobal_batch_size = 8\nseq_len = 64\n")
    result = run("train", config, f"--job.dump_folder={folder}/run", f"--training.steps={STEPS}",
                 "--model.vocab_size=50304", "--model.block_size=64", "--model.n_embd=64",
                 "--metrics.log_interval=1", "--checkpoint.interval=0", *overrides)
    if result.returncode != 0:
        raise AssertionError(f"train {overrides} failed:\n{result.stderr[-3000:]}")
    lines = metrics_lines(f"{folder}/run")
    return [m["loss"] for m in lines], lines[-1]["state_bytes"]["activations"]


class FusedLoss(unittest.TestCase):
    def check(self, *layout):
        with tempfile.TemporaryDirectory() as fused_dir, tempfile.TemporaryDirectory() as ref_dir:
            fused_losses, fused = train(fused_dir, "--training.fused_loss=true", *layout)
            ref_losses, unfused = train(ref_dir, "--training.fused_loss=false", *layout)
        drop = 1 - fused / unfused
        worst = max(abs(a - b) / abs(b) for a, b in zip(fused_losses, ref_losses))
        print(f"{layout or '1 process'}: activations {unfused:,} -> {fused:,} bytes "
              f"({100 * drop:.1f}% less); losses within {worst:.2g}")
        self.assertGreaterEqual(drop, 0.30)
        self.assertLess(worst, 1e-5)

    def test_one_process(self):
        self.check()

    def test_vocab_parallel(self):
        self.check("--parallel.tp=2", "--parallel.plan=gpt/megatron-tp")


if __name__ == "__main__":
    unittest.main()

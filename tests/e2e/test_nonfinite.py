"""NOTE [Non-finite steps] end to end: a diverging run stops (or skips) on the step the loss or
gradient norm stops being finite, on every rank, and no checkpoint of a NaN state is written."""
import os
import re
import shutil
import tempfile
import time
import unittest

from common import metrics_lines, run, system_python_value

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
# A learning rate that overflows the weights within a few steps.
DIVERGE = ("--optimizer.lr=1e12", "--optimizer.weight_decay=0", "--training.grad_clip=0",
           "--lr_scheduler.warmup_steps=0", "--lr_scheduler.decay=constant")


def train(folder, *overrides, steps=12):
    start = time.monotonic()
    result = run("train", CONFIG, f"--job.dump_folder={folder}", f"--training.steps={steps}",
                 "--metrics.log_interval=1", "--eval.interval=0", "--eval.windows=2",
                 "--checkpoint.interval=1", "--checkpoint.keep=0", *overrides)
    return result, time.monotonic() - start


def all_finite(h5_files):
    script = f"""
import h5py, numpy as np
bad = 0
for path in {h5_files!r}:
    f = h5py.File(path, 'r')
    def visit(name, obj):
        global bad
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == 'f' and obj.size:
            bad += int(not np.isfinite(obj[()]).all())
    f.visititems(visit)
print(bad)
"""
    return system_python_value(script) == 0


def committed_steps(folder):
    root = os.path.join(folder, "checkpoints")
    return sorted(d for d in os.listdir(root)
                  if d.startswith("step-") and os.path.exists(os.path.join(root, d, "COMMIT")))


class NonFinite(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-nonfinite-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_checkpoints_finite(self, folder):
        steps = committed_steps(folder)
        root = os.path.join(folder, "checkpoints")
        files = [os.path.join(root, s, f) for s in steps for f in os.listdir(os.path.join(root, s))
                 if f.endswith(".h5")]
        self.assertTrue(files)
        self.assertTrue(all_finite(files), f"a committed checkpoint holds NaN/inf: {steps}")
        with open(os.path.join(root, "latest")) as f:
            latest = f.read().strip()
        self.assertEqual(latest, steps[-1])
        return steps

    def test_stop_exits_3_on_the_step_and_saves_no_nan(self):
        folder = os.path.join(self.tmp, "stop")
        result, seconds = train(folder, *DIVERGE)
        self.assertEqual(result.returncode, 3, result.stderr[-2000:])
        # Every rank stops on the same step, with one error line each.
        errors = re.findall(r"\[rank (\d)\] error: step (\d+): the loss is (\S+) and the gradient norm",
                            result.stderr)
        self.assertEqual(sorted(r for r, _, _ in errors), ["0", "1", "2", "3"], result.stderr[-2000:])
        self.assertEqual(len({s for _, s, _ in errors}), 1, errors)
        stopped_at = int(errors[0][1])
        losses = [m["loss"] for m in metrics_lines(folder)]
        steps = self.check_checkpoints_finite(folder)
        print(f"\n[non-finite stop] exit 3 after {seconds:.1f} s at step {stopped_at} (loss "
              f"{errors[0][2]}); {len(losses)} finite steps logged; committed {steps[0]}..{steps[-1]}")
        self.assertEqual(len(losses), stopped_at - 1)
        self.assertLess(int(steps[-1].split("-")[1]), stopped_at)

    def test_skip_counts_and_stops_after_max_skipped(self):
        folder = os.path.join(self.tmp, "skip")
        result, _ = train(folder, *DIVERGE, "--training.on_nonfinite=skip",
                          "--training.max_skipped=3")
        self.assertEqual(result.returncode, 3, result.stderr[-2000:])
        warnings = [l for l in result.stderr.splitlines() if "the update is skipped" in l]
        self.assertEqual(len(warnings), 2, result.stderr[-2000:])  # the 3rd in a row stops
        self.assertIn("3 steps in a row were not finite", result.stderr)
        steps = self.check_checkpoints_finite(folder)
        print(f"\n[non-finite skip] {len(warnings)} steps skipped, the 3rd in a row stopped the "
              f"job (exit 3); committed {steps[0]}..{steps[-1]}, all finite")

    def test_nonfinite_config_values_are_config_errors(self):
        for value in ["nan", "inf", "-inf"]:
            result = run("train", CONFIG, f"--optimizer.lr={value}", "--print-config")
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("'optimizer.lr' must be a finite number", result.stderr)


if __name__ == "__main__":
    unittest.main()

"""checkpoint.async end to end: the files a background write leaves are the synchronous save's,
dataset for dataset and byte for byte, in every format (and a pipeline's merged save, whose
writers take turns), and resuming from them continues the loss curve bitwise."""
import os
import shutil
import subprocess
import tempfile
import unittest

from common import SYSTEM_PYTHON, run, train_losses

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
COMMON = ("--training.dtype=float64", "--metrics.log_interval=1", "--eval.interval=0",
          "--lr_scheduler.decay=constant", "--checkpoint.interval=5", "--checkpoint.keep=0")
PIPELINE = ("--parallel.pp=2", "--parallel.dp=1", "--parallel.microbatches=2",
            "--parallel.pp_schedule=1f1b")

# Every dataset (bytes, dtype, shape and attributes), the hard links, and /meta but for the config
# text (which says checkpoint.async) of each pair of checkpoint files given (A1 B1 A2 B2 ...); prints
# the number of datasets of each pair, a line a pair. One process for all (h5py's import is most
# of its time).
SAME_FILES = """
import sys, h5py, numpy as np
def datasets(f):
    out = []
    f.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(out)
for path_a, path_b in zip(sys.argv[1::2], sys.argv[2::2]):
    print(f'{path_a} against {path_b}:', file=sys.stderr)  # names the pair a failure is in
    a, b = h5py.File(path_a, 'r'), h5py.File(path_b, 'r')
    names = datasets(a)
    assert names == datasets(b), (names, datasets(b))
    for n in names:
        x, y = a[n], b[n]
        assert x.dtype == y.dtype and x.shape == y.shape, n
        assert x[()].tobytes() == y[()].tobytes(), f'{n}: bytes differ'
        assert sorted(x.attrs) == sorted(y.attrs), n
        for k in x.attrs:
            assert np.array_equal(x.attrs[k], y.attrs[k]), (n, k)
    meta_a = {k: v for k, v in a['meta'].attrs.items() if k not in ('config', 'run_id')}
    meta_b = {k: v for k, v in b['meta'].attrs.items() if k not in ('config', 'run_id')}
    assert sorted(meta_a) == sorted(meta_b)
    for k in meta_a:
        assert np.array_equal(meta_a[k], meta_b[k]), k
    if 'model/lm_head.weight' in a:
        assert a['model/lm_head.weight'].id == a['model/transformer.wte.weight'].id
        assert b['model/lm_head.weight'].id == b['model/transformer.wte.weight'].id
    print(len(names))
"""


def checkpoint_files(step_folder):
    return sorted(f for f in os.listdir(step_folder) if not f.startswith("."))


class AsyncCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-async-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train(self, name, *overrides, steps=10):
        folder = os.path.join(self.tmp, name)
        losses = train_losses(CONFIG, folder, f"--training.steps={steps}", *COMMON, *overrides)
        return folder, losses

    def expect_same_files(self, sync_step, async_step, label):
        self.assertEqual(checkpoint_files(sync_step), checkpoint_files(async_step), label)
        h5_files, pairs = [], []
        for name in checkpoint_files(sync_step):
            path_a, path_b = os.path.join(sync_step, name), os.path.join(async_step, name)
            if not name.endswith(".h5"):
                with open(path_a) as a, open(path_b) as b:
                    self.assertEqual(a.read(), b.read(), f"{label}: {name}")
                continue
            h5_files.append(name)
            pairs += [path_a, path_b]
        check = subprocess.run([SYSTEM_PYTHON, "-c", SAME_FILES, *pairs], capture_output=True,
                               text=True)
        self.assertEqual(check.returncode, 0, f"{label}: {h5_files}: {check.stderr[-2000:]}")
        counts = check.stdout.split()
        self.assertEqual(len(counts), len(h5_files), check.stdout)
        for name, count in zip(h5_files, counts):
            print(f"{label}: {name}: {count} datasets bitwise equal")

    def check_layout(self, label, fmt, *layout):
        sync_folder, sync_losses = self.train(f"{label}-sync", f"--checkpoint.format={fmt}", *layout)
        async_folder, async_losses = self.train(f"{label}-async", f"--checkpoint.format={fmt}",
                                                "--checkpoint.async=true", *layout)
        self.assertEqual(async_losses, sync_losses, f"{label}: training changed with async saves")
        with open(os.path.join(sync_folder, "checkpoints", "latest")) as a, \
             open(os.path.join(async_folder, "checkpoints", "latest")) as b:
            self.assertEqual(a.read(), b.read())
        for step in ["step-000005", "step-000010"]:
            self.expect_same_files(os.path.join(sync_folder, "checkpoints", step),
                                   os.path.join(async_folder, "checkpoints", step), f"{label} {step}")
        # Resuming from the async step 5 continues the straight curve, bitwise. (Resuming from the
        # sync one is test_checkpoint's, and the two step folders were just found byte-equal.)
        _, resumed = self.train(f"{label}-resume", f"--checkpoint.format={fmt}",
                                "--checkpoint.load=" + os.path.join(async_folder, "checkpoints", "step-000005"),
                                *layout)
        self.assertEqual(resumed, sync_losses[5:], f"{label}: resume is not exact")
        print(f"{label}: async files equal sync's bitwise, and resuming from them continues the "
              f"curve bitwise ({len(resumed)} resumed steps)")

    def test_sharded(self):
        self.check_layout("sharded", "sharded")

    def test_deduped(self):
        self.check_layout("deduped", "deduped")

    def test_merged(self):
        self.check_layout("merged", "merged")

    def test_merged_pipeline(self):
        # Two writers (one per stage) add their tensors to model.h5 in turn.
        self.check_layout("merged-pp2", "merged", *PIPELINE)

    def test_log_names_the_stall(self):
        folder = os.path.join(self.tmp, "log")
        result = run("train", CONFIG, f"--job.dump_folder={folder}", "--training.steps=4",
                     "--checkpoint.interval=2", "--checkpoint.async=true", "--eval.interval=0")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        lines = [l for l in (result.stdout + result.stderr).splitlines() if "saved " in l]
        self.assertEqual(len(lines), 2, lines)
        for line in lines:
            self.assertRegex(line, r"\(sharded, async\): .* in .*, \d+ MB/s \(stall \d+ ms\)")
        with open(os.path.join(folder, "checkpoints", "latest")) as f:
            self.assertEqual(f.read().strip(), "step-000004")


if __name__ == "__main__":
    unittest.main()

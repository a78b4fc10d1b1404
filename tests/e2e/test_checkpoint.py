"""HDF5 checkpoints end to end: exact resume in every format, load-time resharding, merge,
inspect, h5py, and clear errors for damaged or mismatched checkpoints."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from common import SYSTEM_PYTHON, max_relative, run, system_python_value, train_losses

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
F64 = ("--training.dtype=float64",)


def train(folder, *overrides, steps=20):
    return train_losses(CONFIG, folder, f"--training.steps={steps}", "--metrics.log_interval=1", "--eval.interval=0",
                        "--lr_scheduler.decay=constant", *overrides)


def h5_max_difference(a, b):
    """The largest |a - b| over every dataset of two merged files (h5py)."""
    script = f"""
import h5py, numpy as np
a = h5py.File({a!r}, 'r'); b = h5py.File({b!r}, 'r')
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
print(max(float(np.max(np.abs(a[n][()] - b[n][()]))) if a[n].size else 0.0 for n in names))
"""
    return system_python_value(script)


class Checkpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-ckpt-")
        cls.straight = train(os.path.join(cls.tmp, "straight"), *F64)
        cls.straight32 = train(os.path.join(cls.tmp, "straight32"), "--checkpoint.format=merged",
                               "--checkpoint.interval=10")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    saves = {}

    def saved(self, name, fmt, *extra, dtype=F64):
        """The checkpoints folder of a 10-step run saving at step 10 in `fmt`. Runs of the same
        arguments are made once for the class (no test writes into a saved run's folder), under
        the name of the test that asked first."""
        key = (fmt, extra, dtype)
        if key not in self.saves:
            folder = os.path.join(self.tmp, name)
            train(folder, *dtype, f"--checkpoint.format={fmt}", "--checkpoint.interval=10", *extra, steps=10)
            self.saves[key] = os.path.join(folder, "checkpoints")
        return self.saves[key]

    def test_resume_is_bitwise_in_every_format(self):
        straight_final = os.path.join(self.tmp, "straight32", "checkpoints", "step-000020", "model.h5")
        for fmt in ["sharded", "deduped", "merged"]:
            ckpt = self.saved(f"resume-{fmt}", fmt, dtype=())
            folder = os.path.join(self.tmp, f"resumed-{fmt}")
            losses = train(folder, "--checkpoint.load=" + ckpt, f"--checkpoint.format={fmt}",
                           "--checkpoint.interval=10")
            self.assertEqual(len(losses), 10)
            self.assertEqual(losses, self.straight32[10:], f"{fmt}: resumed float32 losses differ")
            # Final parameters and optimizer state, bitwise.
            merged = os.path.join(self.tmp, f"resumed-{fmt}.h5")
            self.assertEqual(run("merge", os.path.join(folder, "checkpoints"), "-o", merged).returncode, 0)
            self.assertEqual(h5_max_difference(merged, straight_final), 0.0, fmt)
            print(f"{fmt}: 10 + resume + 10 steps equal the straight 20 bitwise (float32 losses, parameters, Adam)")

    def test_load_time_resharding(self):
        ckpt = self.saved("reshard", "sharded")
        merged = os.path.join(self.tmp, "reshard.h5")
        self.assertEqual(run("merge", ckpt, "-o", merged).returncode, 0)
        layouts = {"TP4": ("--parallel.dp=1", "--parallel.tp=4"),
                   "DP4": ("--parallel.dp=4", "--parallel.tp=1", "--parallel.plan=gpt/dp-only"),
                   "1 process": ("--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=")}
        for source, path in [("sharded DP2xTP2", ckpt), ("merged", merged)]:
            for name, overrides in layouts.items():
                folder = os.path.join(self.tmp, f"re-{name}-{source}".replace(" ", "_"))
                losses = train(folder, *F64, "--checkpoint.load=" + path, *overrides)
                err = max_relative(losses, self.straight[10:])
                print(f"{source} -> {name}: max relative loss error {err:.3g}")
                self.assertLessEqual(err, 1e-10)

    def test_merge_equals_single_process_state_and_opens_with_h5py(self):
        ckpt = self.saved("merge", "sharded")
        single = self.saved("merge-single", "merged", "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=")
        merged = os.path.join(self.tmp, "merged.h5")
        result = run("merge", ckpt, "-o", merged)
        self.assertEqual(result.returncode, 0, result.stderr)
        probe = subprocess.run([SYSTEM_PYTHON, "-c", "import h5py, numpy"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("python3-h5py is not installed")
        script = f"""
import h5py, numpy as np
a = h5py.File({merged!r}, 'r'); b = h5py.File({os.path.join(single, 'step-000010', 'model.h5')!r}, 'r')
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert 'model/lm_head.weight' in a and a['model/lm_head.weight'].id == a['model/transformer.wte.weight'].id
assert a['model/transformer.wte.weight'].shape == (96, 32), a['model/transformer.wte.weight'].shape
assert a['model/transformer.h.1.mlp.c_fc.weight'].shape == (128, 32)
# Differences relative to the scale of each kind of state (parameters, exp_avg, exp_avg_sq):
# tensors that are zero in exact arithmetic (k_proj.bias gets no gradient) hold rounding noise.
kind = lambda n: n.split('/')[-1] if n.startswith('optimizer/') else 'model'
scale, diff = dict(), dict()
for n in names:
    x, y = a[n][()], b[n][()]
    assert x.shape == y.shape, n
    k = kind(n)
    scale[k] = max(scale.get(k, 0.0), float(np.max(np.abs(y))))
    diff[k] = max(diff.get(k, 0.0), float(np.max(np.abs(x - y))))
worst = max(diff[k] / scale[k] for k in scale)
print(len(names), 'datasets; max relative difference', worst)
assert worst <= 1e-10, worst
"""
        check = subprocess.run([SYSTEM_PYTHON, "-c", script], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)
        print("h5py: merged DP2xTP2 sharded vs 1-process merged:", check.stdout.strip())

    def test_eval_reports_the_checkpoint_val_loss(self):
        ckpt = self.saved("eval", "deduped")
        with open(os.path.join(os.path.dirname(ckpt), "metrics.jsonl")) as f:
            trained = [json.loads(line) for line in f][-1]["val_loss"]
        for name, overrides in [("DP2xTP2", ()), ("1 process", ("--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="))]:
            result = run("eval", CONFIG, "--checkpoint", ckpt, "--training.dtype=float64", *overrides)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            value = float(result.stdout.split()[-1])
            print(f"eval {name}: val_loss {value:.12f} (training reported {trained:.12f})")
            self.assertLessEqual(abs(value - trained) / trained, 1e-10)

    def test_eval_builds_no_optimizer_and_reads_bf16_and_zero_checkpoints(self):
        # An evaluation job has no optimizer or float32 master weights: a bf16 run's float32
        # state is read and rounded into its bf16 parameters, as training rounds its masters.
        for name, extra in [("bf16", ("--training.dtype=bfloat16",)),
                            ("zero3", ("--parallel.zero=3", "--training.dtype=float64"))]:
            ckpt = self.saved(f"eval-{name}", "sharded", *extra, dtype=())
            with open(os.path.join(os.path.dirname(ckpt), "metrics.jsonl")) as f:
                trained = [json.loads(line) for line in f][-1]["val_loss"]
            result = run("eval", CONFIG, "--checkpoint", ckpt, *extra)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            self.assertIn("evaluation only (no optimizer)", result.stdout + result.stderr)
            value = float(result.stdout.split()[-1])
            error = abs(value - trained) / trained
            print(f"eval {name} (no optimizer): val_loss {value!r}, training {trained!r}, "
                  f"relative error {error:.2e}")
            self.assertLessEqual(error, 1e-12)

    def test_sizes_and_throughput(self):
        rows = []
        for fmt in ["sharded", "deduped", "merged"]:
            ckpt = self.saved(f"size-{fmt}", fmt, dtype=())
            step = os.path.join(ckpt, "step-000010")
            size = sum(os.path.getsize(os.path.join(step, f)) for f in os.listdir(step))
            info = run("inspect", ckpt)
            self.assertEqual(info.returncode, 0, info.stderr)
            self.assertIn("step 10", info.stdout)
            self.assertIn("model/lm_head.weight -> model/transformer.wte.weight (hard link)", info.stdout)
            rows.append((fmt, size))
        print("\n".join(f"GPT (gpt-dp2-tp2, float32) DP2xTP2 {fmt}: {size} bytes on disk" for fmt, size in rows))
        sizes = dict(rows)
        self.assertLess(sizes["deduped"], sizes["sharded"])

    def test_uncommitted_step_is_ignored_and_pruning_keeps_newest(self):
        folder = os.path.join(self.tmp, "prune")
        train(folder, "--checkpoint.interval=2", "--checkpoint.keep=2", steps=8)
        steps = sorted(d for d in os.listdir(os.path.join(folder, "checkpoints")) if d.startswith("step-"))
        self.assertEqual(steps, ["step-000006", "step-000008"])
        # A step folder without COMMIT is refused with a clear error.
        broken = os.path.join(folder, "checkpoints", "step-000008")
        os.remove(os.path.join(broken, "COMMIT"))
        result = run("inspect", broken)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("has no COMMIT", result.stderr)
        result = run("inspect", os.path.join(folder, "checkpoints"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("step 6", result.stdout)
        self.assertIn("ignoring " + broken + ": it has no COMMIT", result.stderr)

    def test_errors_name_the_file(self):
        ckpt = self.saved("errors", "sharded")
        step = os.path.join(ckpt, "step-000010")
        damaged = os.path.join(self.tmp, "damaged")
        shutil.copytree(step, damaged)
        with open(os.path.join(damaged, "rank-00001.h5"), "r+b") as f:
            f.truncate(100)
        result = run("inspect", damaged)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("rank-00001.h5 is not a readable HDF5 file", result.stderr)
        os.remove(os.path.join(damaged, "rank-00001.h5"))
        result = run("inspect", damaged)
        self.assertIn("written by 4 ranks but rank-00001.h5 missing", result.stderr)
        result = run("train", CONFIG, "--model.n_embd=64", f"--checkpoint.load={step}",
                     f"--job.dump_folder={os.path.join(self.tmp, 'mismatch')}", "--training.steps=12")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("model.n_embd = 64 in this job's config, but the checkpoint's run was trained "
                      "with model.n_embd = 32", result.stderr)
        # A format version from the future.
        future = os.path.join(self.tmp, "future.h5")
        self.assertEqual(run("merge", step.replace("errors", "errors"), "-o", future).returncode, 0)
        probe = subprocess.run([SYSTEM_PYTHON, "-c",
                                f"import h5py; f = h5py.File({future!r}, 'r+'); f['meta'].attrs['format_version'] = 99"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            result = run("inspect", future)
            self.assertIn("has format version 99, newer than this vescale-train reads (2)", result.stderr)
        merged = os.path.join(self.tmp, "exists.h5")
        open(merged, "w").close()
        result = run("merge", step, "-o", merged)
        self.assertIn("exists; not overwriting it", result.stderr)


if __name__ == "__main__":
    unittest.main()

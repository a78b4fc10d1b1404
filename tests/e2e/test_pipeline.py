"""Pipeline parallelism end to end on real processes: a PP2 x DP2 x TP2 run (8 processes,
1F1B, Megatron sequence parallel) reproduces the 1-process loss curve in float64; its checkpoint
evaluates to training's val_loss under the same mesh and under 1 process, merges to the
1-process state, and inspects; the metrics count pipeline bytes under pp."""
import json
import os
import shutil
import tempfile
import unittest

from common import max_relative, run, system_python_value, train_losses

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
COMMON = ["--training.steps=5", "--training.dtype=float64", "--metrics.log_interval=1",
          "--eval.interval=0", "--parallel.microbatches=4", "--checkpoint.interval=5"]
SINGLE = ["--parallel.dp=1", "--parallel.tp=1", "--parallel.plan="]
THREE_D = ["--parallel.pp=2", "--parallel.dp=2", "--parallel.tp=2",
           "--parallel.plan=gpt/megatron-sp", "--parallel.pp_schedule=1f1b"]


def h5_kind_difference(a, b):
    """Per kind of state (model, exp_avg, exp_avg_sq): the largest |a - b| over the whole model
    relative to the largest |b| (elementwise would measure noise where the exact value is 0:
    k_proj.bias has a zero gradient, which AdamW turns into rounding-noise updates)."""
    script = f"""
import h5py, numpy as np
a = h5py.File({a!r}, 'r'); b = h5py.File({b!r}, 'r')
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
diff, scale = {{}}, {{}}
for n in names:
    kind = n.split('/')[-1] if n.startswith('optimizer/') else 'model'
    diff[kind] = max(diff.get(kind, 0.0), float(np.max(np.abs(a[n][()] - b[n][()]))))
    scale[kind] = max(scale.get(kind, 0.0), float(np.max(np.abs(b[n][()]))))
print(max(diff[k] / scale[k] for k in diff))
"""
    return system_python_value(script)


class PipelineEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-pipeline-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def folder(self, name):
        return os.path.join(self.tmp, name)

    def test_three_d_run_matches_one_process_and_its_checkpoint_moves(self):
        ref = train_losses(CONFIG, self.folder("single"), *COMMON, *SINGLE,
                           "--checkpoint.format=merged")
        losses = train_losses(CONFIG, self.folder("3d"), *COMMON, *THREE_D,
                              "--checkpoint.format=sharded", timeout=900)
        err = max_relative(losses, ref)
        print(f"float64 PP2xDP2xTP2 (8 processes, 1f1b): {len(losses)} steps, "
              f"max relative loss error {err:.3g}")
        self.assertEqual(len(losses), len(ref))
        self.assertLessEqual(err, 1e-10)

        with open(os.path.join(self.folder("3d"), "metrics.jsonl")) as f:
            metrics = [json.loads(line) for line in f]
        self.assertGreater(metrics[0]["comm_bytes"].get("pp", 0), 0, metrics[0])
        print(f"pp bytes per step: {metrics[0]['comm_bytes']['pp']}")
        val_loss = metrics[-1]["val_loss"]

        ckpt = os.path.join(self.folder("3d"), "checkpoints", "latest")
        for label, layout in [("PP2xDP2xTP2", THREE_D), ("1 process", SINGLE)]:
            result = run("eval", CONFIG, "--checkpoint", ckpt, "--training.dtype=float64",
                         *layout, "--parallel.microbatches=4", timeout=600)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            evaluated = float(result.stdout.split()[-1])
            print(f"eval of the PP checkpoint under {label}: {evaluated!r} (training: {val_loss!r})")
            self.assertLessEqual(abs(evaluated - val_loss) / val_loss, 1e-12, label)

        merged = os.path.join(self.tmp, "3d-merged.h5")
        self.assertEqual(run("merge", ckpt, "-o", merged).returncode, 0)
        single = os.path.join(self.folder("single"), "checkpoints", "step-000005", "model.h5")
        diff = h5_kind_difference(merged, single)
        print(f"merged PP2xDP2xTP2 state vs the 1-process state: max relative difference per kind {diff:.3g}")
        self.assertLessEqual(diff, 1e-10)
        info = run("inspect", ckpt)
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertIn("transformer.h.1.mlp.c_fc.weight", info.stdout)
        self.assertIn("lm_head.weight", info.stdout)


if __name__ == "__main__":
    unittest.main()

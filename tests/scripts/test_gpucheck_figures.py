"""gpucheck.figures: the numbers the table holds to their bars, from metrics.jsonl, eval and
generate output, configs and traces."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck import figures  # noqa: E402
from gpucheck.figures import NoFigure  # noqa: E402

TIMES = {"forward": 0.010, "backward": 0.020, "grad_sync": 0.0, "optimizer": 0.004, "other": 0.001}


def step(n, loss, **more):
    return dict(step=n, loss=loss, step_time_s=0.05, time_s=TIMES, tokens_per_s=512 / 0.05, **more)


class Files(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def jsonl(self, name, rows):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return path


class LossCurves(Files):
    def test_max_relative_over_loss_and_val_loss(self):
        ref = self.jsonl("ref.jsonl", [step(1, 4.0), step(2, 2.0, val_loss=2.5)])
        run = self.jsonl("run.jsonl", [step(1, 4.0), step(2, 2.0, val_loss=2.5 * (1 + 3e-4))])
        self.assertEqual(figures.max_relative(ref, run, 1, 2), "3.00e-04")
        self.assertEqual(figures.max_relative(ref, ref, 1, 2), "0.00e+00")
        self.assertEqual(figures.max_relative(ref, run, 2, 1), "3.00e-04")

    def test_missing_steps_are_no_figure(self):
        ref = self.jsonl("ref.jsonl", [step(1, 4.0), step(2, 2.0)])
        run = self.jsonl("run.jsonl", [step(1, 4.0)])
        with self.assertRaisesRegex(NoFigure, r"^1 of 2 steps to compare$"):
            figures.max_relative(ref, run, 1, 2)
        with self.assertRaisesRegex(NoFigure, r"^0 of 20 steps to compare$"):
            figures.max_relative(ref, os.path.join(self.tmp.name, "absent.jsonl"), 1, 20)

    def test_a_malformed_file_is_no_figure(self):
        ref = self.jsonl("ref.jsonl", [step(1, 4.0)])
        bad = os.path.join(self.tmp.name, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"step": 1, "loss": \n')
        with self.assertRaisesRegex(NoFigure, r"^unreadable figures: JSONDecodeError"):
            figures.max_relative(ref, bad, 1, 1)

    def test_val_loss_relative(self):
        run = self.jsonl("dev64.jsonl", [step(10, 3.0, val_loss=2.0)])
        self.assertEqual(figures.val_loss_relative(run, 10, "x\nval_loss 2.0\n"), "0.00e+00")
        self.assertEqual(figures.val_loss_relative(run, 10, "val_loss 1.0\nval_loss 2.2\n"), "1.00e-01")
        with self.assertRaisesRegex(NoFigure, "no val_loss to compare"):
            figures.val_loss_relative(run, 10, "loss 2.0\n")
        with self.assertRaisesRegex(NoFigure, "no val_loss to compare"):
            figures.val_loss_relative(run, 5, "val_loss 2.0\n")

    def test_token_differences(self):
        ids = " ".join(str(i) for i in range(19))
        self.assertEqual(figures.token_differences(ids, ids + "\n"), "0")
        self.assertEqual(figures.token_differences(ids, ids.replace("18", "7")), "1")
        with self.assertRaisesRegex(NoFigure, r"^19 and 3 ids, not 19$"):
            figures.token_differences(ids, "1 2 3")


class Speed(Files):
    def test_step_figures(self):
        rows = [dict(step(1, 5.0), step_time_s=0.5), step(2, 4.5, mfu=0.2),
                dict(step(3, 4.0, mfu=0.3), step_time_s=0.07), step(4, 3.5, mfu=0.25)]
        got = figures.step_figures(self.jsonl("m.jsonl", rows), 512, 1, "vescale-train")
        self.assertEqual(got["who"], "vescale-train")
        self.assertAlmostEqual(got["median_step_ms"], 50.0)
        self.assertAlmostEqual(got["tokens_per_s"], 512 / 0.05)
        self.assertAlmostEqual(got["warmup_s"], 0.5)
        self.assertAlmostEqual(got["mfu"], 0.25)
        self.assertEqual((got["loss_first"], got["loss_last"]), (5.0, 3.5))
        self.assertEqual(list(got["phases_ms"]), ["fwd", "bwd", "sync", "opt", "other"])
        self.assertAlmostEqual(got["phases_ms"]["bwd"], 20.0)
        self.assertIsNone(got["peak_alloc_bytes"])

    def test_gpu_memory_peaks(self):
        rows = [step(1, 5.0, gpu_mem=dict(allocated_peak=10, reserved_peak=20)),
                step(2, 4.0, gpu_mem=dict(allocated_peak=30, reserved_peak=25))]
        got = figures.step_figures(self.jsonl("m.jsonl", rows), 512, 1, "x")
        self.assertEqual((got["peak_alloc_bytes"], got["peak_reserved_bytes"]), (30, 25))

    def test_no_steps_past_the_warmup(self):
        with self.assertRaisesRegex(NoFigure, r"^no steps after the first 10 in "):
            figures.step_figures(self.jsonl("m.jsonl", [step(1, 5.0)]), 512, 10, "x")

    def test_mfu_agreement_within_a_point(self):
        # 512 / 0.05 tokens/s x 1e6 FLOPs over 1e11: 10.24 %
        close = self.jsonl("a.jsonl", [step(1, 5.0, mfu=0.5), step(2, 4.0, mfu=0.1050)])
        self.assertEqual(figures.mfu_agreement(close, 1e6, 1e11, 1),
                         ("10.50% vs 10.24%, at most 0.26 points apart", True))
        far = self.jsonl("b.jsonl", [step(2, 4.0, mfu=0.1150), step(3, 4.0, mfu=0.1024)])
        self.assertEqual(figures.mfu_agreement(far, 1e6, 1e11, 1),
                         ("10.24% vs 10.24%, at most 1.26 points apart", False))
        with self.assertRaisesRegex(NoFigure, "no steps to compare"):
            figures.mfu_agreement(close, 1e6, 1e11, 5)


class Models(unittest.TestCase):
    def test_gpt2_124m_flops(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        config = figures.load_config(os.path.join(root, "configs", "gpt2-124m.toml"))
        flops, peak = figures.model_flops(config)
        # 124.4M parameters (vocab 50304 with the tied head once, 1024 positions, 12 blocks)
        params = 50304 * 768 + 1024 * 768 + 12 * (12 * 768 * 768 + 13 * 768) + 2 * 768
        self.assertEqual(flops, 6 * params + 12 * 12 * 768 * 1024)
        self.assertEqual(peak, float(config["metrics"]["peak_flops"]))

    def test_vocab_padded_to_its_multiple_times_tp(self):
        config = dict(model=dict(n_layer=1, n_embd=2, vocab_size=10, vocab_multiple=4, block_size=3),
                      training=dict(seq_len=3), parallel=dict(tp=2))
        params = 16 * 2 + 3 * 2 + (12 * 4 + 13 * 2) + 2 * 2
        self.assertEqual(figures.model_flops(config), (6 * params + 12 * 1 * 2 * 3, 0.0))


class Traces(Files):
    def test_trace_counts(self):
        events = [dict(cat="phase"), dict(cat="phase"), dict(cat="kernel"), dict(cat="step"), "x"]
        path = self.jsonl("trace.json", [])
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        self.assertEqual(figures.trace_counts(path), (os.path.getsize(path), 2, 1))
        with open(path, "w") as f:
            json.dump(events[:1], f)  # a bare list of events
        self.assertEqual(figures.trace_counts(path)[1:], (1, 0))


if __name__ == "__main__":
    unittest.main()

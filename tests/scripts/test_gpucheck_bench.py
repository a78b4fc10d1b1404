"""The bench stage's decisions: a peer's row (ok, skipped with its reason, FAIL, another model)
and the MFU row (vescale-train's own MFU against this check's count)."""
import contextlib
import io
import json
import os
import stat
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck.stages import bench  # noqa: E402
from gpucheck_fakes import LogsTestCase  # noqa: E402

PEER = dict(who="torch-eager", tokens_per_s=7370.2, median_step_ms=69.47, peak_alloc_bytes=None,
            peak_reserved_bytes=None, warmup_s=0.06, loss_first=5.576, loss_last=5.069,
            flops_per_token=1000)
SAID = ("[20:01:42] info [mfu] peak 0.5 TFLOP/s per rank: 250 GFLOP/s a core (its best one-thread "
        "float32 matmul) x 2 cores a rank")


class BenchRows(LogsTestCase):
    def fake_peer(self, last_line, rc):
        """A "python" whose peer prints `last_line` and exits `rc`."""
        self.write("python", f"#!/bin/sh\necho 'step 1'\necho '{last_line}'\nexit {rc}\n")
        path = os.path.join(self.folder, "python")
        os.chmod(path, stat.S_IRWXU)
        self.check.torch_python = path

    def peer_row(self, *args):
        with contextlib.redirect_stdout(io.StringIO()):
            bench.peer_row(self.check, "torch-eager", "c.toml", 1000, 0.0, *args)
        return self.check.report.bench[-1]

    def test_peer_ok(self):
        self.fake_peer(json.dumps(PEER), 0)
        self.assertEqual(self.peer_row(), "| torch-eager | 7,370 | - | 69.5 | - | - | - | 0.06 | "
                         "5.576 → 5.069 | - |")
        self.assertEqual(self.check.report.passed, 1)

    def test_peer_that_cannot_is_skipped_with_its_reason(self):
        self.fake_peer("[peer] --compile: torch 1.13 has no torch.compile (PyTorch 2.0+)", 2)
        self.assertEqual(self.peer_row(), "| torch-eager | skipped: --compile: torch 1.13 has no "
                         "torch.compile (PyTorch 2.0+) |")
        self.assertEqual(self.check.report.skipped, 1)

    def test_peer_failures(self):
        self.fake_peer("Traceback: boom", 1)
        self.assertEqual(self.peer_row(), "| torch-eager | FAIL: exit 1: Traceback: boom |")
        self.fake_peer("no json", 0)
        self.assertEqual(self.peer_row(), "| torch-eager | FAIL: exit 0: no json |")
        self.fake_peer(json.dumps(dict(PEER, flops_per_token=999)), 0)
        self.assertEqual(self.peer_row(), "| torch-eager | FAIL: not the same model: 999 FLOPs per "
                         "token, the config's 1000 |")
        self.assertEqual(self.check.report.failed, 3)

    def test_no_torch_and_past_the_deadline(self):
        self.assertEqual(self.peer_row(), "| torch-eager | skipped: no python3 here imports torch "
                         "(set PYTHON) |")
        self.fake_peer("{}", 0)
        self.check.clock.deadline = 0
        self.assertEqual(self.peer_row(), "| torch-eager | skipped: past the deadline |")

    def mfu_row(self, steps, config_peak=0.0, said=SAID):
        self.write("mfu_check.log", f"{said}\n")
        self.write("mfu_check.jsonl", "".join(json.dumps(dict(step=n, mfu=m, tokens_per_s=t)) + "\n"
                                              for n, m, t in steps))
        with contextlib.redirect_stdout(io.StringIO()):
            bench.mfu_row(self.check, "mfu_check", 1e6, config_peak)
        return self.check.report.mfu[-1]

    def test_mfu_against_its_own_peak(self):
        # 1e6 FLOPs a token at 1e5 tokens/s over 0.5 TFLOP/s: 20 %
        row = self.mfu_row([(1, 0.9, 1e5), (2, 0.2, 1e5), (3, 0.205, 1e5)])
        self.assertEqual(row, "mfu: vescale-train's metrics.jsonl vs 6N + 12LCT over vescale-train's "
                         "own peak (250 GFLOP/s a core (its best one-thread float32 matmul) x 2 cores "
                         "a rank): 20.50% vs 20.00%, at most 0.50 points apart (bar 1 point): ok")

    def test_mfu_off_by_more_than_a_point(self):
        self.assertTrue(self.mfu_row([(2, 0.22, 1e5)]).endswith("at most 2.00 points apart (bar 1 "
                                                                 "point): FAIL"))

    def test_mfu_without_its_line_or_its_run(self):
        self.assertIn(": no [mfu] line in mfu_check.log (bar 1 point): FAIL",
                      self.mfu_row([(2, 0.2, 1e5)], said="step 1"))
        self.check.run_failed["mfu_check"] = 124
        self.assertEqual(self.mfu_row([]), "mfu: FAIL: mfu_check timed out (exit 124: its limit, or "
                         "the call's END, came first)")
        os.remove(self.check.log("mfu_check.log"))
        with contextlib.redirect_stdout(io.StringIO()):
            bench.mfu_row(self.check, "mfu_check", 1e6, 0.0)
        self.assertEqual(self.check.report.mfu[-1],
                         "mfu: skipped: vescale-train's bench row did not run")

    def test_mfu_on_an_h200_against_the_config_peak(self):
        self.check.mode, self.check.gpu_name = "gpu", "NVIDIA H200"
        self.check.report.mode = "gpu"
        row = self.mfu_row([(11, 0.4, 4e8)], config_peak=989e12)
        self.assertIn(" over the config's metrics.peak_flops, NVIDIA H200's dense bf16: 40.00% vs "
                      "40.44%", row)


if __name__ == "__main__":
    unittest.main()

"""What the tables read from the programs they run: vescale-train's `done:` and other log lines,
metrics.jsonl, the peak RSS line, du's and dd's figures."""
import json
import os
import subprocess
import tempfile
import unittest

import benchsuite_path  # noqa: F401
from benchsuite import disk, peak_rss, process, trainlog
from benchsuite.peers import machine
from benchsuite.tables import checkpoint, cp, flight, pipeline

# Recorded from vescale-train (the baseline binary, configs/gpt-tiny.toml, 3 steps).
TRAIN_LOG = """\
[19:53:50] info step 3/3 | loss 5.0511 | val_loss 4.9450 | tok/s 9,037 | done
[19:53:50] info saved /tmp/a/checkpoints/step-000003 (sharded): 9.8MiB in 58.61ms, 175 MB/s (stall 69 ms)
[19:53:50] info done: 3 steps in 409.48ms, val_loss 5.5513 -> 4.9450, 7286 tokens/s, peak RSS 241.1MiB
[19:53:50] info [kernels] rank 0 took: blocked attention, foreach AdamW
"""


class TrainLog(unittest.TestCase):
    def test_done_line(self):
        self.assertEqual(trainlog.tokens_per_s(TRAIN_LOG), "7286")
        self.assertEqual(trainlog.peak_rss(TRAIN_LOG), "241.1MiB")
        self.assertEqual(trainlog.summary(TRAIN_LOG),
                         "3 steps in 409.48ms, val_loss 5.5513 -> 4.9450, 7286 tokens/s, peak RSS 241.1MiB")

    def test_the_last_done_line_gives_tokens(self):
        log = ("plain done: 40 steps, 13891 tokens/s (libtorch 1.13.1, 1 thread(s))\n"
               "peer done: 40 steps, 18642 tokens/s (python torch 2.11), peak RSS 980 MiB\n")
        self.assertEqual(trainlog.tokens_per_s(log), "18642")
        self.assertIsNone(trainlog.tokens_per_s("Traceback: no done line\n"))
        self.assertEqual(trainlog.peak_rss("no summary"), "")

    def test_step_metrics_skip_lines_without_a_step_time(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps({"step": 1, "step_time_s": 0.1}) + "\n")
                f.write(json.dumps({"step": 1, "val_loss": 4.9}) + "\n")
                f.write(json.dumps({"step": 2, "step_time_s": 0.2}) + "\n")
            self.assertEqual([m["step"] for m in trainlog.step_metrics(path)], [1, 2])
            self.assertEqual(len(trainlog.metrics(path)), 3)


class LogLines(unittest.TestCase):
    def test_pipeline_rank_line(self):
        log = ("pipeline pp rank 0: bubble 18.8% (5.1s waiting of 27.2s over 30 steps); peak "
               "micro-batches in flight stage 0: 4, stage 2: 2; peak resident memory 214.8MiB\n"
               "pipeline pp rank 1: bubble 12.1% (3.3s waiting of 27.2s over 30 steps); peak "
               "micro-batches in flight stage 1: 3, stage 3: 1; peak resident memory 210.4MiB\n")
        self.assertEqual(pipeline.rank_stats(log, 0), ("18.8%", "214.8MiB", "s0: 4, s2: 2"))
        self.assertEqual(pipeline.rank_stats(log, 1), ("12.1%", "210.4MiB", "s1: 3, s3: 1"))
        self.assertEqual(pipeline.rank_stats(log, 2), ("", "", ""))
        self.assertEqual(pipeline.simulated(
            "steps\nbubble 0.040000 (simulated: idle / (pp x makespan) = idle / (2 x 25)); "
            "formula (p-1)/(6m+p-1) = 0.040000\n"), "0.040000")

    def test_checkpoint_saves(self):
        self.assertEqual(checkpoint.saves(TRAIN_LOG), [(175.0, 69.0)])

    def test_checkpoint_measures_the_step_latest_names(self):
        # Not a step number of its own: a run also saves at its last step, and keep = 1 removes
        # the ones before it.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "step-000006"))
            with open(os.path.join(d, "latest"), "w") as f:
                f.write("step-000006\n")
            self.assertEqual(checkpoint.latest_step(d), os.path.join(d, "step-000006"))

    def test_ring_formula(self):
        self.assertEqual(cp.ring_bytes("plan: ring attention sends 12582912 B of keys and values\n"),
                         "12582912")
        self.assertEqual(cp.ring_bytes("no cp here\n"), "0")

    def test_flight_ns(self):
        self.assertEqual(flight.ns_a_call(
            "flight recorder: 67.8 ns a call (begin, waiting, end; a site change every 8 calls), "
            "best of 5 rounds of 2000000 calls\n"), "67.8")

    def test_machine(self):
        self.assertEqual(machine.blas_core(
            "threads: 1 intra-op, kernels SkylakeX (OpenBLAS picked Haswell on this CPU; ...)"),
            "SkylakeX")
        self.assertEqual(machine.blas_core("threads: 2"), "")
        self.assertTrue(machine.has_bf16("flags\t: fpu avx512f avx512_bf16 amx_tile\n"))
        self.assertFalse(machine.has_bf16("flags\t: fpu avx512f avx512_bf16x\n"))
        self.assertEqual(machine.cpu_model("Architecture: x86_64\nModel name:   AMD EPYC\n"), "AMD EPYC")


class PeakRss(unittest.TestCase):
    def test_parse_the_last_line(self):
        self.assertEqual(peak_rss.parse_kib("x\nmax RSS KiB 12\nmax RSS KiB 331776\n"), 331776)
        self.assertIsNone(peak_rss.parse_kib("max RSS KiB\n"))
        self.assertEqual(peak_rss.mib(331776), "324 MiB")
        self.assertEqual(peak_rss.mib(1536 + 512), "2 MiB")

    def test_measures_the_largest_child(self):
        grow = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096])"
        done = subprocess.run(["python3", peak_rss.__file__, "python3", "-c", grow],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 0)
        self.assertGreater(peak_rss.parse_kib(done.stderr), 200 * 1024)

    def test_keeps_the_exit_status(self):
        done = subprocess.run(["python3", peak_rss.__file__, "python3", "-c", "raise SystemExit(3)"],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(done.returncode, 3)
        self.assertIsNotNone(peak_rss.parse_kib(done.stderr))


class Disk(unittest.TestCase):
    def test_sizes_as_du_counts_them(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "sub"))
            for name, size in (("a", 1000), ("sub/b", 3 * 2**20 + 1)):
                with open(os.path.join(d, name), "wb") as f:
                    f.write(b"\1" * size)
            os.link(os.path.join(d, "a"), os.path.join(d, "sub", "a-again"))
            du_sb = int(subprocess.run(["du", "-sb", d], capture_output=True, text=True,
                                       timeout=30).stdout.split()[0])
            self.assertEqual(disk.apparent_bytes(d), du_sb)
            du_m = int(subprocess.run(["du", "-m", os.path.join(d, "sub", "b")], capture_output=True,
                                      text=True, timeout=30).stdout.split()[0])
            self.assertEqual(disk.disk_mib(os.path.join(d, "sub", "b")), du_m)

    def test_dd_summary(self):
        line = "300000000 bytes (300 MB, 286 MiB) copied, 0.5 s, 600 MB/s"
        self.assertAlmostEqual(disk.dd_mb_s(line), 600.0)

    def test_dd_of_no_whole_mib_is_refused(self):
        # An empty or missing step folder measured 0 bytes: dd of 0 MiB gave 0 MB/s, then a
        # division by zero in the checkpoint row.
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(process.BenchError, "under the 1 MiB"):
                disk.write_mb_s(d, 1000)


if __name__ == "__main__":
    unittest.main()

"""gpucheck.results: bench/results/<gpu>-<date>.txt, DIR/table.txt, and what goes to $OUT."""
import os
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck.results import gpu_short_name, publish, results_path  # noqa: E402


class Names(unittest.TestCase):
    def test_gpu_short_names(self):
        for name, short in (("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
                            ("NVIDIA H200", "h200"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
                            ("Tesla V100-SXM2-16GB", "v100"), ("NVIDIA L40S", "l40s"),
                            ("NVIDIA", "gpu"), ("", "gpu")):
            self.assertEqual(gpu_short_name(name), short, name)

    def test_results_path(self):
        self.assertEqual(results_path("NVIDIA H200", "2026-11-26"), "bench/results/h200-2026-11-26.txt")


class Publish(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.out_dir = os.path.join(self.tmp.name, "gc")
        os.makedirs(os.path.join(self.out_dir, "logs"))
        with open(os.path.join(self.out_dir, "logs", "cpu64.log"), "w") as f:
            f.write("step 1\n")

    def read(self, *path):
        with open(os.path.join(self.tmp.name, *path)) as f:
            return f.read()

    def test_table_alone_under_cpu(self):
        publish("table\n", self.out_dir)
        self.assertEqual(self.read("gc", "table.txt"), "table\n")
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["gc"])

    def test_results_and_out(self):
        results = os.path.join(self.tmp.name, "bench", "results", "h200-2026-11-26.txt")
        out = os.path.join(self.tmp.name, "out")
        publish("first\n", self.out_dir, results, out)
        publish("second\n", self.out_dir, results, out)  # after each stage: the latest wins
        self.assertEqual(self.read("bench", "results", "h200-2026-11-26.txt"), "second\n")
        self.assertEqual(sorted(os.listdir(out)), ["h200-2026-11-26.txt", "logs.tgz"])
        self.assertEqual(self.read("out", "h200-2026-11-26.txt"), "second\n")
        with tarfile.open(os.path.join(out, "logs.tgz")) as tar:
            self.assertEqual(sorted(tar.getnames()), ["logs", "logs/cpu64.log"])

    def test_out_without_results_is_named_table(self):
        out = os.path.join(self.tmp.name, "out")
        publish("t\n", self.out_dir, "", out)
        self.assertEqual(sorted(os.listdir(out)), ["logs.tgz", "table.txt"])


if __name__ == "__main__":
    unittest.main()

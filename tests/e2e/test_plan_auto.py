"""`vescale-train plan auto` end to end: it calibrates on real processes (once: the second run
reads the cache), ranks the layouts of N ranks, writes the winner's config with -o (which `plan
lint` accepts and which has the winning layout), and --verify trains the top ones and compares."""
import os
import re
import shutil
import tempfile
import unittest

from common import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-tiny.toml")


class PlanAuto(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="vescale-plan-auto-")
        self.dump = f'--job.dump_folder="{self.folder}"'

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_ranks_writes_the_winner_and_verifies(self):
        best = os.path.join(self.folder, "best.toml")
        first = run("plan", "auto", CONFIG, "--nproc", "2", "--top", "5", "-o", best,
                    "--verify", "2", "--verify-steps", "6", "--explain", self.dump,
                    "--data.source=synthetic", timeout=300)
        self.assertEqual(first.returncode, 0, first.stderr[-3000:])
        out = first.stdout
        print(out[out.find("rank  layout"):])
        self.assertIn("calibration written to", out)
        self.assertIn("matmul of", out)  # --explain
        rows = re.findall(r"^\s+(\d+)\s+(pp=\d dp=\d tp=\d.*?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)"
                          r"\s+([0-9.]+)\s", out, re.M)
        self.assertGreaterEqual(len(rows), 5, out)
        times = [float(r[2]) for r in rows[:5]]
        self.assertEqual(times, sorted(times), "ranked by predicted step time")
        for r in rows[:5]:  # step = compute + comm + bubble (each rounded to 0.1 ms)
            self.assertAlmostEqual(float(r[2]), float(r[3]) + float(r[4]) + float(r[5]), delta=0.2)
        winner = re.search(r"^best: (.*) \(", out, re.M).group(1)
        self.assertRegex(out, r"rank correlation of predicted and measured step times over the 2")
        # The winner's config: plan lint accepts it, and it has the winning layout.
        lint = run("plan", "lint", best, "--data.source=synthetic", timeout=120)
        self.assertEqual(lint.returncode, 0, lint.stderr)
        with open(best) as f:
            text = f.read()
        for key, value in re.findall(r"(pp|dp|tp|zero)=(\d+)", winner):
            self.assertRegex(text, rf"(?m)^{key} = {value}$")
        # The second run reads the cached calibration.
        second = run("plan", "auto", CONFIG, "--nproc", "2", "--top", "3", self.dump,
                     "--data.source=synthetic", timeout=120)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("(--recalibrate to measure again)", second.stdout)

    def test_bad_input_is_one_line(self):
        mlp = os.path.join(ROOT, "configs", "mlp-tp.toml")
        result = run("plan", "auto", mlp, "--nproc", "2", self.dump, timeout=60)
        self.assertEqual(result.returncode, 2)
        self.assertRegex(result.stderr, r"error: plan auto: .*transformer families only")
        tiny = run("plan", "auto", CONFIG, "--nproc", "2", "--memory-per-rank", "1MiB", self.dump,
                   "--data.source=synthetic", timeout=120)
        self.assertEqual(tiny.returncode, 2, tiny.stdout)
        self.assertRegex(tiny.stderr, r"error: plan auto: none of the \d+ layouts fits in 1\.0 MiB")


if __name__ == "__main__":
    unittest.main()

"""`vescale-train plan schedule` end to end: the stage split, the per-rank timeline and the bubble
of a job's pipeline, from its config alone (no data is read); invalid combinations fail with one
line. And `train` still refuses pp > 1 until the pipeline executor lands."""
import os
import re
import shutil
import tempfile
import unittest

from common import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-tiny.toml")


def stage_rows(stdout):
    """{stage: (rank, layers text)} from the stage table."""
    rows = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\d+)\s+(\d+)\s+(\S+(?: \.\. \S+)?)\s", line)
        if match:
            rows[int(match.group(1))] = (int(match.group(2)), match.group(3))
    return rows


class PlanSchedule(unittest.TestCase):
    def schedule(self, *overrides):
        result = run("plan", "schedule", CONFIG, *overrides, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_1f1b_bubble_is_the_formula(self):
        pp, m = 2, 4
        out = self.schedule(f"--parallel.pp={pp}", f"--parallel.microbatches={m}",
                            "--parallel.pp_schedule=1f1b")
        match = re.search(r"^bubble ([0-9.]+) .*formula \(p-1\)/\(m\+p-1\) = ([0-9.]+)$", out,
                          re.M)
        self.assertIsNotNone(match, out)
        expected = (pp - 1) / (m + pp - 1)
        self.assertAlmostEqual(float(match.group(1)), expected, places=6)
        self.assertAlmostEqual(float(match.group(2)), expected, places=6)
        # Balanced: embedding with the first blocks, the head with the last.
        rows = stage_rows(out)
        self.assertEqual(sorted(rows), [0, 1], out)
        self.assertEqual(rows[0][0], 0)
        self.assertTrue(rows[0][1].startswith("embedding .. transformer.h."), out)
        self.assertEqual(rows[1][0], 1)
        self.assertTrue(rows[1][1].endswith(".. head"), out)
        self.assertRegex(out, r"(?m)^rank 0 \| 0F0 0F1 ")
        self.assertRegex(out, r"(?m)^rank 1 \| \.\s+1F0 1B0 ")

    def test_explicit_split_interleaved(self):
        out = self.schedule("--parallel.pp=2", "--parallel.microbatches=4",
                            "--parallel.pp_virtual=2", "--parallel.pp_schedule=interleaved-1f1b",
                            '--parallel.pp_split=["transformer.h.1", "transformer.h.2", "head"]')
        rows = stage_rows(out)
        self.assertEqual(rows, {0: (0, "embedding .. transformer.h.0"),
                                1: (1, "transformer.h.1"),
                                2: (0, "transformer.h.2 .. transformer.h.3"),
                                3: (1, "head")}, out)
        match = re.search(r"^bubble ([0-9.]+) .*formula \(p-1\)/\(v\*m\+p-1\) = ([0-9.]+)$", out,
                          re.M)
        self.assertIsNotNone(match, out)
        self.assertAlmostEqual(float(match.group(1)), 1 / (2 * 4 + 1), places=6)

    def test_zbv_meets_its_lower_bound(self):
        pp, m = 2, 4
        out = self.schedule(f"--parallel.pp={pp}", f"--parallel.microbatches={m}",
                            "--parallel.pp_virtual=2", "--parallel.pp_schedule=zbv")
        match = re.search(r"^bubble ([0-9.]+) .*formula \(p-1\)/\(6m\+p-1\) \[a lower bound.*\] = "
                          r"([0-9.]+)$", out, re.M)
        self.assertIsNotNone(match, out)
        self.assertAlmostEqual(float(match.group(1)), (pp - 1) / (6 * m + pp - 1), places=6)
        self.assertEqual({k: v[0] for k, v in stage_rows(out).items()}, {0: 0, 1: 1, 2: 1, 3: 0})
        self.assertIn("0W3", out)

    def check_error(self, needle, *overrides):
        result = run("plan", "schedule", CONFIG, *overrides, timeout=120)
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(needle, lines[0])

    def test_invalid_combinations_exit_2_with_one_error_line(self):
        self.check_error("1f1b needs at least pp = 2 micro-batches, got 1", "--parallel.pp=2")
        self.check_error("zbv needs parallel.pp_virtual = 2", "--parallel.pp=2",
                         "--parallel.microbatches=4", "--parallel.pp_schedule=zbv")
        self.check_error("did you mean 'transformer.h.2'?", "--parallel.pp=2",
                         "--parallel.microbatches=4", "--parallel.pp_split=transformer.h2")


class TrainChecksPipelines(unittest.TestCase):
    def test_an_invalid_schedule_is_refused_before_anything_runs(self):
        tmp = tempfile.mkdtemp(prefix="vescale-pp-")
        try:
            path = os.path.join(tmp, "job.toml")
            dump = os.path.join(tmp, "out")
            with open(path, "w") as f:
                f.write(f'[job]\ndump_folder = "{dump}"\n[parallel]\npp = 2\nmicrobatches = 1\n')
            result = run("train", path, timeout=120)
            self.assertEqual(result.returncode, 2, result.stderr)
            lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn("1f1b needs at least pp = 2 micro-batches, got 1", lines[0])
            self.assertFalse(os.path.exists(dump))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

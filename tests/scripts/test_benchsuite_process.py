"""Running a measured program: its deadline, a failure's message, which output comes back."""
import os
import subprocess
import tempfile
import unittest

import benchsuite_path  # noqa: F401
from benchsuite import process


class Run(unittest.TestCase):
    def test_output_with_standard_error(self):
        out = process.run(["sh", "-c", "echo out; echo err >&2"])
        self.assertEqual(sorted(out.split()), ["err", "out"])
        self.assertEqual(process.run_quiet(["sh", "-c", "echo out; echo err >&2"]), "out\n")
        self.assertEqual(process.run_stderr(["sh", "-c", "echo out; echo err >&2"]), "err\n")

    def test_a_missed_deadline_raises(self):
        with self.assertRaisesRegex(process.BenchError, r"sleep 5: no end after 0.2 s"):
            process.run(["sleep", "5"], timeout=0.2)

    def test_a_failure_names_the_command_and_its_last_lines(self):
        with self.assertRaisesRegex(process.BenchError, r"exited with 2:\nl3\nl4\nl5\nl6\nl7$"):
            process.run(["sh", "-c", "for i in 1 2 3 4 5 6 7; do echo l$i; done; exit 2"])
        self.assertEqual(process.run(["sh", "-c", "echo x; exit 2"], check=False), "x\n")

    def test_run_to_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "log")
            process.run_to_file(["sh", "-c", "echo out; echo err >&2"], path)
            with open(path) as f:
                self.assertEqual(sorted(f.read().split()), ["err", "out"])
            with self.assertRaises(process.BenchError):
                process.run_to_file(["false"], path)

    def test_with_peak_rss_wraps_the_command(self):
        cmd = process.with_peak_rss(["true"], "python3")
        self.assertEqual(cmd, ["python3", process.PEAK_RSS, "true"])
        self.assertIn("max RSS KiB", subprocess.run(cmd, capture_output=True, text=True,
                                                    timeout=30).stderr)


if __name__ == "__main__":
    unittest.main()

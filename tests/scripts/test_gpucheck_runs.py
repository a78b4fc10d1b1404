"""gpucheck.runs: time limits as `timeout -k 10` kept them, and why a run failed in one line."""
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck import runs  # noqa: E402
from gpucheck_fakes import LogsTestCase  # noqa: E402

PY = sys.executable


class Limits(LogsTestCase):
    def setUp(self):
        super().setUp()
        self.log = os.path.join(self.folder, "run.log")

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_exit_status_and_output(self):
        rc = runs.run_limited([PY, "-c", "import sys; print('out'); sys.exit(3)"], 30, self.log)
        self.assertEqual((rc, self.read(self.log)), (3, "out\n"))

    def test_stderr_apart(self):
        errors = os.path.join(self.folder, "run.err")
        code = "import sys; print('ids'); print('said', file=sys.stderr)"
        self.assertEqual(runs.run_limited([PY, "-c", code], 30, self.log, errors=errors), 0)
        self.assertEqual((self.read(self.log), self.read(errors)), ("ids\n", "said\n"))

    def test_append(self):
        runs.run_limited([PY, "-c", "print(1)"], 30, self.log)
        runs.run_limited([PY, "-c", "print(2)"], 30, self.log, append=True)
        self.assertEqual(self.read(self.log), "1\n2\n")

    def test_past_its_limit_124(self):
        sleeper = [PY, "-c", "import time; time.sleep(20)"]
        self.assertEqual(runs.run_limited(sleeper, 0.3, self.log), 124)

    def test_one_that_ignores_sigterm_is_killed_137(self):
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(20)"
        with mock.patch.object(runs, "KILL_AFTER", 0.3):
            self.assertEqual(runs.run_limited([PY, "-c", code], 0.3, self.log), 137)

    def test_killed_by_a_signal_as_the_shell_says(self):
        code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
        self.assertEqual(runs.run_limited([PY, "-c", code], 30, self.log), 139)

    def test_a_missing_program_is_127(self):
        self.assertEqual(runs.run_limited(["/no/such/program"], 30, self.log), 127)
        self.assertIn("/no/such/program", self.read(self.log))


class WhyFailed(LogsTestCase):
    def test_first_error_line(self):
        self.write("dev64.log", "[12:00:01] info step 1\n[12:00:02] error [config] bad | key\r\n"
                       "[12:00:03] error second\n")
        self.check.run_failed["dev64"] = 1
        self.assertEqual(runs.why_failed(self.check, "dev64"),
                         "dev64 exited 1: [12:00:02] error [config] bad / key")

    def test_last_line_without_an_error_line(self):
        self.write("cpu64.log", "one\n" + "x" * 200 + "\n")
        self.check.run_failed["cpu64"] = 134
        self.assertEqual(runs.why_failed(self.check, "cpu64"), "cpu64 exited 134: " + "x" * 160)

    def test_timed_out(self):
        self.check.run_failed["bench_vescale"] = 124
        self.assertEqual(runs.why_failed(self.check, "bench_vescale"),
                         "bench_vescale timed out (exit 124: its limit, or the call's END, came first)")

    def test_passed_run_without_figures(self):
        self.assertEqual(runs.why_failed(self.check, "absent"), "absent exited ?: no output")

    def test_smi_max(self):
        self.write("bench_vescale.smi", "512\n12034\n900\n")
        self.assertEqual(runs.smi_max(self.check, "bench_vescale"), "12034")
        self.assertEqual(runs.smi_max(self.check, "absent"), "-")


if __name__ == "__main__":
    unittest.main()

"""`train --max-restarts N` end to end: a worker killed mid-run (VESCALE_TEST_DIE_AT_STEP, a
test-only SIGKILL) makes the local launcher restart every worker from the newest committed
checkpoint; the job finishes with the numbers of an uninterrupted run. Out of restarts, it fails
naming them."""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from common import run
from live_run import CONFIG, EXACT, losses_by_step, max_error_against

MESH = ("--parallel.tp=1",)  # dp = 2
STEPS = 20


def train(folder, *args, env=None):
    start = time.monotonic()
    result = run("train", CONFIG, f"--job.dump_folder={folder}", *EXACT, *MESH,
                 f"--training.steps={STEPS}", *args, env=env)
    return result, time.monotonic() - start


class Restart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-restart-")
        folder = os.path.join(cls.tmp, "reference")
        result, _ = train(folder)
        assert result.returncode == 0, result.stderr[-3000:]
        cls.reference = [loss for _, loss in losses_by_step(folder)]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_killed_worker_restarts_from_latest_with_the_same_numbers(self):
        folder = os.path.join(self.tmp, "killed-once")
        # Rank 1 SIGKILLs itself before step 12 (0-based) of the first attempt; checkpoints at 5, 10.
        result, seconds = train(folder, "--max-restarts", "2", "--checkpoint.interval=5",
                                env={"VESCALE_TEST_DIE_AT_STEP": "1:12"})
        log = result.stderr
        self.assertEqual(result.returncode, 0, log[-3000:])
        restarts = re.findall(r"\[launch\] (rank \d+ .*); restart (\d+) of (\d+) (from .*)", log)
        print(f"killed once: exit 0 in {seconds:.1f}s; restarts: {restarts}")
        self.assertEqual(restarts, [("rank 1 was killed by signal 9 (Killed)", "1", "2",
                                     "from step 10")])
        self.assertIn("[launch] done after 1 restart", log)
        # The log's rendezvous lines: a fresh rendezvous folder for the restart.
        stores = re.findall(r"\[launch\] rank 0 pid \d+ \(rendezvous file (\S+)\)", log)
        self.assertEqual(len(stores), 2)
        self.assertNotEqual(stores[0], stores[1])
        # The restart dropped the lines of steps 11 and 12 (after its checkpoint) and logged
        # them again: one line per step, in order (NOTE [One run per dump folder]).
        self.assertIn("metrics.jsonl: dropped 2 lines after step 10", log)
        entries = losses_by_step(folder)
        steps = [s for s, _ in entries]
        self.assertEqual(steps, list(range(1, STEPS + 1)))
        error = max_error_against(entries, self.reference)
        print(f"killed once: every logged step (1..10, then 11..20 after the restart, steps 11 and "
              f"12 logged twice but kept once) against the uninterrupted run: max relative error "
              f"{error:.1e}")
        self.assertLess(error, 1e-10)

    def test_restart_from_scratch_without_a_checkpoint(self):
        folder = os.path.join(self.tmp, "scratch")
        result, _ = train(folder, "--max-restarts", "1", env={"VESCALE_TEST_DIE_AT_STEP": "0:3"})
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertIn("; restart 1 of 1 from scratch", result.stderr)
        # A restart from scratch is a new run: the first attempt's lines were moved aside
        # (NOTE [One run per dump folder]).
        entries = losses_by_step(folder)
        self.assertEqual([s for s, _ in entries], list(range(1, STEPS + 1)))
        self.assertLess(max_error_against(entries, self.reference), 1e-10)
        aside = [f for f in os.listdir(folder) if re.fullmatch(r"metrics\.[0-9a-f]{16}\.jsonl", f)]
        self.assertEqual(len(aside), 1, os.listdir(folder))
        with open(os.path.join(folder, aside[0])) as f:
            self.assertEqual([json.loads(line)["step"] for line in f], [1, 2, 3])

    def test_out_of_restarts_fails_naming_them(self):
        folder = os.path.join(self.tmp, "out-of-restarts")
        # Dies before step 7 in every attempt (attempts 0, 1, 2): resumed from step 5 each time.
        result, seconds = train(folder, "--max-restarts", "2", "--checkpoint.interval=5",
                                env={"VESCALE_TEST_DIE_AT_STEP": "1:7:9"})
        log = result.stderr
        print(f"out of restarts: exit {result.returncode} after {seconds:.1f}s")
        self.assertNotEqual(result.returncode, 0)
        self.assertEqual(len(re.findall(r"; restart \d of 2 from step 5", log)), 2, log[-3000:])
        self.assertRegex(log, r"rank 1 \(pid \d+\) was killed by signal 9 \(Killed\).*; no "
                              r"restarts left \(--max-restarts 2 used up\)")

    def test_config_errors_are_not_restarted(self):
        result, _ = train(os.path.join(self.tmp, "bad"), "--max-restarts", "3",
                          "--checkpoint.load=/nonexistent/step-000001")
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        self.assertNotIn("restart 1 of", result.stderr)


if __name__ == "__main__":
    unittest.main()

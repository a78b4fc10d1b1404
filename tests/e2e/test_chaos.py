"""Chaos: SIGKILL a random worker at random moments of a run that checkpoints every step (often
in the middle of a save), and let `--max-restarts` resume it from `latest` each time. Every
resume must succeed, every step's float64 loss, however often it was rerun, must equal the
uninterrupted run's within 1e-10, and metrics.jsonl must end with one line per step, in order.

VESCALE_CHAOS_KILLS (default 5 here; scripts/chaos.sh runs 20) sets the number of kills and
VESCALE_CHAOS_SEED the random moments; the table of kills is printed."""
import os
import random
import shutil
import signal
import tempfile
import time
import unittest

from common import run
from live_run import CONFIG, EXACT, LiveRun, losses_by_step, max_error_against

KILLS = int(os.environ.get("VESCALE_CHAOS_KILLS", "5"))
SEED = int(os.environ.get("VESCALE_CHAOS_SEED", "11"))
MESH = ("--parallel.tp=1",)  # dp = 2
CHECKPOINTS = ("--checkpoint.interval=1", "--checkpoint.keep=2")
STEPS = 20 + 12 * KILLS


class Chaos(unittest.TestCase):
    def test_random_kills_resume_exactly(self):
        tmp = tempfile.mkdtemp(prefix="vescale-chaos-")
        try:
            self.chaos(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def chaos(self, tmp):
        rng = random.Random(SEED)
        reference_folder = os.path.join(tmp, "reference")
        result = run("train", CONFIG, f"--job.dump_folder={reference_folder}", *EXACT, *MESH,
                     *CHECKPOINTS, f"--training.steps={STEPS}")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        reference = [loss for _, loss in losses_by_step(reference_folder)]

        folder = os.path.join(tmp, "chaos")
        started = time.monotonic()
        job = LiveRun(folder, *EXACT, *MESH, *CHECKPOINTS, f"--training.steps={STEPS}",
                      "--max-restarts", str(KILLS))
        kills = []  # (rank, seconds into the attempt, last step logged)
        try:
            for k in range(KILLS):
                # Wait for this attempt to log a step, then a random moment (steps, saves).
                job.wait_for(lambda r: len(r.attempt_pids) == k + 1 and len(r.pids) == 2)
                attempt_start = time.monotonic()
                logged = len(job.steps)
                job.wait_for(lambda r: len(r.steps) > logged)
                time.sleep(rng.uniform(0.0, 0.6))
                rank = rng.randrange(2)
                at_step = job.last_step()
                os.kill(job.pids[rank], signal.SIGKILL)
                kills.append((rank, time.monotonic() - attempt_start, at_step))
                job.wait_for(lambda r: len(r.restarts) == k + 1)
            code = job.wait(timeout=300)
        finally:
            if job.proc.poll() is None:
                job.proc.kill()
        seconds = time.monotonic() - started
        self.assertEqual(code, 0, job.log()[-4000:])

        entries = losses_by_step(folder)
        resumed = [int(frm.split()[-1]) if frm != "from scratch" else 0
                   for _, _, frm in job.restarts]
        print(f"\nchaos: {KILLS} SIGKILLs (seed {SEED}) in a {STEPS}-step dp=2 float64 run with a "
              f"checkpoint every step; finished in {seconds:.1f}s")
        print(f"{'kill':>4}  {'rank':>4}  {'at (s)':>7}  {'last step logged':>16}  "
              f"{'resumed from':>12}  {'max error after':>15}")
        for k, ((rank, at, step), start) in enumerate(zip(kills, resumed)):
            end = resumed[k + 1] if k + 1 < len(resumed) else STEPS
            after = [(s, loss) for s, loss in entries if start < s <= max(end, start + 1)]
            print(f"{k + 1:>4}  {rank:>4}  {at:>7.2f}  {step:>16}  {start:>12}  "
                  f"{max_error_against(after, reference):>15.1e}")
            # A step's line is written just before its (synchronous) save: a resume goes back
            # at most to the step before the last one logged.
            self.assertGreaterEqual(start, step - 1)
        error = max_error_against(entries, reference)
        print(f"every one of {len(entries)} logged steps against the uninterrupted run: max "
              f"relative error {error:.1e}")
        self.assertEqual(len(job.restarts), KILLS)
        # One line per step, in order: each resume dropped the lines after its checkpoint.
        self.assertEqual([s for s, _ in entries], list(range(1, STEPS + 1)))
        self.assertLess(error, 1e-10)


if __name__ == "__main__":
    unittest.main()

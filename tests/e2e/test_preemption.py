"""NOTE [Preemption] end to end: SIGTERM to the launcher or to one worker mid-run makes every rank
finish its step, save it (COMMIT) and exit 4, losing no step; resuming gives the losses of an
uninterrupted run; one request sent as several signals (GNU timeout, scancel) is one request; a
signal 2 s or more after the first ends the job at once."""
import os
import shutil
import signal
import tempfile
import time
import unittest

from common import run
from live_run import (CONFIG, EXACT, LiveRun, committed_steps, latest_step, losses_by_step,
                      max_error_against)

REFERENCE_STEPS = 60
LONG = "--training.steps=100000"  # never reached: the runs are stopped by signals


class Preemption(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-preempt-")
        cls.reference = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def reference_losses(self, mesh):
        """An uninterrupted float64 run of REFERENCE_STEPS steps on `mesh`."""
        if mesh not in self.reference:
            folder = os.path.join(self.tmp, "reference-" + "-".join(mesh).replace("=", ""))
            result = run("train", CONFIG, f"--job.dump_folder={folder}", *EXACT, *mesh,
                         f"--training.steps={REFERENCE_STEPS}")
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            entries = losses_by_step(folder)
            self.assertEqual([s for s, _ in entries], list(range(1, REFERENCE_STEPS + 1)))
            self.reference[mesh] = [loss for _, loss in entries]
        return self.reference[mesh]

    def preempt(self, name, mesh, send, extra=(), prefix=()):
        """Runs a long job, calls send(run) after step 5, and checks exit 4, a committed
        checkpoint of the last step logged, and an exact resume from it."""
        folder = os.path.join(self.tmp, name)
        job = LiveRun(folder, *EXACT, *mesh, *extra, LONG, "--checkpoint.interval=1000",
                      prefix=prefix)
        job.wait_for(lambda r: r.last_step() >= 5 and len(r.pids) == r_world(mesh))
        signalled_at, step_at_signal = time.monotonic(), job.last_step()
        send(job)
        code = job.wait(timeout=120)
        seconds = time.monotonic() - signalled_at
        log = job.log()
        self.assertEqual(code, 4, log[-3000:])
        entries = losses_by_step(folder)
        stopped = entries[-1][0]
        # Steps lost: those run but not in the checkpoint (0: it holds the last step run).
        lost = stopped - latest_step(folder)
        print(f"{name}: signal at step {step_at_signal}, stopped after step {stopped}, exit 4 "
              f"{seconds:.2f}s after the signal, checkpoint step-{latest_step(folder):06d}, "
              f"steps lost {lost}")
        self.assertEqual(lost, 0)
        self.assertEqual(committed_steps(folder), [stopped])  # interval 1000: the signal's save
        self.assertIn(f"stopped after step {stopped} of 100000", log)
        self.assertIn("[launch] every worker saved and stopped on the signal; exit code 4", log)
        self.assertLess(stopped, REFERENCE_STEPS - 5)

        # Resume from it for 5 more steps: the stitched curve is the uninterrupted one.
        resumed = os.path.join(self.tmp, name + "-resumed")
        result = run("train", CONFIG, f"--job.dump_folder={resumed}", *EXACT, *mesh,
                     f"--checkpoint.load={folder}/checkpoints/latest",
                     f"--training.steps={stopped + 5}")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        after = losses_by_step(resumed)
        self.assertEqual([s for s, _ in after], list(range(stopped + 1, stopped + 6)))
        error = max_error_against(entries + after, self.reference_losses(mesh))
        print(f"{name}: steps 1..{stopped} + resumed {stopped + 1}..{stopped + 5} against the "
              f"uninterrupted run: max relative error {error:.1e}")
        self.assertLess(error, 1e-10)
        return seconds

    def test_sigterm_to_the_launcher_saves_and_exits_4(self):
        self.preempt("launcher", (), lambda job: job.proc.send_signal(signal.SIGTERM))

    def test_sigterm_to_one_worker_stops_every_rank(self):
        mesh = ("--parallel.tp=1",)
        self.preempt("one-worker", mesh, lambda job: os.kill(job.pids[1], signal.SIGTERM))

    def test_sigint_to_the_launcher_with_async_merged_checkpoints(self):
        self.preempt("async-merged", ("--parallel.tp=1",),
                     lambda job: job.proc.send_signal(signal.SIGINT),
                     extra=("--checkpoint.async=true", "--checkpoint.format=merged"))

    # NOTE [One stop request, several signals]: how schedulers send one stop request.
    def test_two_signals_at_once_to_the_launcher_are_one_request(self):
        def twice(job):
            job.proc.send_signal(signal.SIGTERM)
            time.sleep(0.05)  # two distinct deliveries (sent together they would merge into one)
            job.proc.send_signal(signal.SIGTERM)
        self.preempt("launcher-twice", (), twice)

    def test_gnu_timeout_signals_the_launcher_then_its_group(self):
        # SIGALRM is GNU timeout's own expiry: it sends SIGTERM to the launcher, then to its
        # process group (the launcher again). --preserve-status: the launcher's exit code.
        self.preempt("gnu-timeout", (), lambda job: job.proc.send_signal(signal.SIGALRM),
                     prefix=("timeout", "--preserve-status", "-s", "TERM", "3600"))

    def test_sigterm_to_the_launcher_and_every_worker_at_once(self):
        # As Slurm's scancel and systemd do: every worker also gets the launcher's SIGTERM.
        def everyone(job):
            for pid in [job.proc.pid, *job.pids.values()]:
                os.kill(pid, signal.SIGTERM)
        self.preempt("everyone", (), everyone)

    def test_second_signal_exits_at_once(self):
        # Rank 1 hangs (in no collective) as step 4 is to start, right after step 3 is logged,
        # so the job cannot save on its own: only the second signal, sent after the window of
        # the first, ends it.
        folder = os.path.join(self.tmp, "twice")
        job = LiveRun(folder, *EXACT, LONG, env={"VESCALE_TEST_HANG_AT_STEP": "1:3"})
        job.wait_for(lambda r: r.last_step() >= 3 and len(r.pids) == 4)
        workers = dict(job.pids)
        signalled_at = time.monotonic()
        job.proc.send_signal(signal.SIGTERM)
        time.sleep(2.5)  # past the window in which further signals are the same request
        self.assertIsNone(job.proc.poll(), "the job ended before the second signal")
        job.proc.send_signal(signal.SIGTERM)
        code = job.wait(timeout=60)
        seconds = time.monotonic() - signalled_at - 2.5
        print(f"a second signal 2.5 s after the first: the launcher exited {code} {seconds:.2f}s "
              f"after it")
        self.assertNotIn(code, (0, 4), job.log()[-3000:])
        self.assertLess(seconds, 5.0)
        self.assertIn("[launch] asked to stop again: killing the workers (SIGKILL)", job.log())
        for pid in workers.values():
            self.assertFalse(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z",
                             f"worker {pid} outlived the launcher")

    def test_second_signal_to_a_single_process_exits_at_once(self):
        folder = os.path.join(self.tmp, "single-twice")
        mesh = ("--parallel.tp=1", "--parallel.dp=1")
        job = LiveRun(folder, *EXACT, *mesh, LONG, env={"VESCALE_TEST_HANG_AT_STEP": "0:3"})
        job.wait_for(lambda r: r.last_step() >= 3)
        job.proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        job.proc.send_signal(signal.SIGINT)  # the same request (a terminal's double Ctrl-C)
        time.sleep(2.5)
        self.assertIsNone(job.proc.poll(), "a signal within the window ended the job")
        signalled_at = time.monotonic()
        job.proc.send_signal(signal.SIGINT)
        code = job.wait(timeout=60)
        seconds = time.monotonic() - signalled_at
        print(f"a third SIGINT to a single process, 2.7 s after the first: exit {code} "
              f"{seconds:.2f}s after it")
        self.assertEqual(code, -signal.SIGINT)
        self.assertLess(seconds, 5.0)


def r_world(mesh):
    """Processes of gpt-dp2-tp2 with `mesh` overrides (dp and tp are 2 unless overridden)."""
    dims = {"dp": 2, "tp": 2}
    for arg in mesh:
        for dim in dims:
            if arg.startswith(f"--parallel.{dim}="):
                dims[dim] = int(arg.split("=")[1])
    return dims["dp"] * dims["tp"]


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0]
    except OSError:
        return "gone"


if __name__ == "__main__":
    unittest.main()

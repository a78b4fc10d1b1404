"""Elastic training end to end (NOTE [Elastic training]), parallel.dp = "auto" on real processes.
`train --elastic`: a rank SIGKILLed mid-run (VESCALE_TEST_DIE_AT_STEP) with no restarts left
loses its slot; the job restarts from the newest committed checkpoint on the ranks left. torchrun
with an elastic rendezvous: two agents of 2 workers; one stopped, the other goes on with half the
world; started again, the job grows back. Each draws the curve of an uninterrupted run on the full
world, to 1e-10 in float64."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from common import BINARY, SYSTEM_PYTHON, free_port, run, torchrun_missing
from live_run import CONFIG, EXACT, LiveRun, losses_by_step, max_error_against

STEPS = 12
COMMON = (*EXACT, "--parallel.dp=auto", f"--training.steps={STEPS}", "--checkpoint.interval=4")


class Elastic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-elastic-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def reference(self, name, *args):
        folder = os.path.join(self.tmp, name)
        result = run("train", CONFIG, f"--job.dump_folder={folder}", *COMMON, *args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return [loss for _, loss in losses_by_step(folder)]

    def shrink(self, name, reference, args, die, lost_rank, world, was, layout):
        folder = os.path.join(self.tmp, name)
        live = LiveRun(folder, *COMMON, *args, "--elastic", "--max-restarts", "0",
                       env={"VESCALE_TEST_DIE_AT_STEP": die})
        code = live.wait(timeout=600)
        log = live.log()
        self.assertEqual(code, 0, log[-4000:])
        restart = re.search(r"\[launch\] rank (\d+) was killed by signal 9 \(Killed\); its slot \d+ "
                            r"failed 1 time, more than --max-restarts 0: dropped; restart 1 on "
                            r"(\d+) ranks \(was (\d+)\) from step (\d+)", log)
        self.assertIsNotNone(restart, log[-4000:])
        self.assertEqual(restart.groups()[:3], (str(lost_rank), str(world), str(was)))
        resumed = re.search(r"\[resume\] step \d+ on a new layout: .*", log)
        self.assertIsNotNone(resumed, log[-4000:])
        self.assertIn(layout, resumed.group(0))
        entries = losses_by_step(folder)
        self.assertEqual([s for s, _ in entries], list(range(1, STEPS + 1)))
        error = max_error_against(entries, reference)
        # From the kill to the first step the survivors logged after the restart.
        restart_time = live.restarts[0][0]
        next_step = next(t for t, _ in live.steps if t > restart_time)
        print(f"{name}: rank {lost_rank} killed, {restart.group(0)[len('[launch] '):]}\n"
              f"  {resumed.group(0)}\n"
              f"  kill -> restart {restart_time - live.kills[0]:.1f}s, kill -> next step "
              f"{next_step - live.kills[0]:.1f}s; every step against the uninterrupted {was}-rank "
              f"run: max relative loss error {error:.1e}")
        self.assertLess(error, 1e-10)

    def test_dp4_loses_a_rank_and_goes_on_dp3(self):
        # 12 rows a step: 3 a rank on dp 4, 4 on dp 3. Rank 2 dies before step 7; checkpoint 4.
        args = ("--nproc", "4", "--parallel.tp=1", "--training.global_batch_size=12")
        reference = self.reference("dp4", *args)
        self.shrink("dp4-to-dp3", reference, args, "2:6", 2, 3, 4,
                    "parallel.pp x dp x tp = 1 x 3 x 1 (3 ranks; 4 rows a rank, 1 micro-batch of "
                    "4), saved on parallel.pp x dp x tp = 1 x 4 x 1 (4 ranks; 3 rows a rank")

    def test_dp2_tp2_loses_a_rank_and_goes_on_dp1_tp2(self):
        # 3 slots left: the most that form a tp2 mesh is 2.
        args = ("--nproc", "4", "--parallel.tp=2")
        reference = self.reference("dp2-tp2", *args)
        self.shrink("dp2xtp2-to-dp1xtp2", reference, args, "1:6", 1, 2, 4,
                    "parallel.pp x dp x tp = 1 x 1 x 2 (2 ranks; 8 rows a rank, 1 micro-batch of "
                    "8), saved on parallel.pp x dp x tp = 1 x 2 x 2 (4 ranks; 4 rows a rank")

    def test_below_min_ranks_it_stops_naming_the_lost_slot(self):
        folder = os.path.join(self.tmp, "min-ranks")
        result = run("train", CONFIG, f"--job.dump_folder={folder}", *COMMON, "--nproc", "2",
                     "--parallel.tp=1", "--elastic", "--min-ranks", "2",
                     env={"VESCALE_TEST_DIE_AT_STEP": "1:3"})
        self.assertNotEqual(result.returncode, 0)
        failure = re.search(r"\[launch\] rank 1 \(pid \d+\) was killed by signal 9 \(Killed\);.*; its "
                            r"slot 1 failed 1 time, more than --max-restarts 0: dropped; the 1 slot "
                            r"left give a mesh of 1 rank, fewer than --min-ranks 2 \(lost: slot 1\)",
                            result.stderr)
        self.assertIsNotNone(failure, result.stderr[-3000:])
        print(f"below --min-ranks: exit {result.returncode}; {failure.group(0)}")

    def test_elastic_needs_dp_auto(self):
        result = run("train", CONFIG, "--elastic", "--parallel.dp=2")
        self.assertEqual(result.returncode, 2)
        self.assertIn('train --elastic: set parallel.dp = "auto"', result.stderr)
        result = run("train", CONFIG, "--parallel.dp=auto")
        self.assertEqual(result.returncode, 2)
        self.assertIn('parallel.dp = "auto" takes dp from the number of ranks', result.stderr)


def logged_steps(folder):
    """The steps metrics.jsonl holds now (rank 0 writes it, whichever agent runs rank 0)."""
    try:
        with open(os.path.join(folder, "metrics.jsonl")) as f:
            return [json.loads(line)["step"] for line in f if line.endswith("\n")]
    except (FileNotFoundError, ValueError):
        return []


class TorchrunElastic(unittest.TestCase):
    STEPS = 200
    # A model big enough that the run outlasts the agents' restarts (~10 steps a second here);
    # a learning rate at which rounding differences do not grow over 200 steps (at 0.01 this
    # model's 1e-16 grow tenfold every few steps: 1e-10 by step 90 of two layouts).
    ARGS = (*EXACT, "--parallel.dp=auto", "--parallel.tp=1", f"--training.steps={STEPS}",
            "--checkpoint.interval=20", "--model.n_embd=128", "--model.n_layer=4",
            "--optimizer.lr=0.001")

    def setUp(self):
        missing = torchrun_missing()
        if missing:
            self.skipTest(missing)
        self.tmp = tempfile.mkdtemp(prefix="vescale-torchrun-elastic-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def agent(self, port, folder, name):
        """One torchrun agent ("node") of 2 workers in the job's elastic rendezvous."""
        cmd = [SYSTEM_PYTHON, "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc_per_node", "2",
               "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "elastic",
               "--rdzv_conf", "last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=2",
               "--max_restarts", "3", "--monitor_interval", "1", "--redirects", "1", "--tee", "1",
               "--no_python", BINARY, "train", CONFIG, f"--job.dump_folder={folder}", *self.ARGS,
               "--checkpoint.load=latest"]
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.addCleanup(lambda: proc.poll() is None and os.killpg(proc.pid, signal.SIGKILL))
        return proc

    def read(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()

    def wait_until(self, what, predicate, timeout=180):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} in {timeout}s; agent logs:\n" +
                                     "\n".join(self.read(n)[-2500:] for n in ("a", "b", "b-again")
                                                if os.path.exists(os.path.join(self.tmp, n + ".log"))))
            time.sleep(0.1)
        return time.monotonic()

    def test_an_agent_leaves_and_comes_back_on_the_same_curve(self):
        reference_folder = os.path.join(self.tmp, "reference")
        result = run("train", CONFIG, f"--job.dump_folder={reference_folder}", "--nproc", "4",
                     *self.ARGS, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        reference = [loss for _, loss in losses_by_step(reference_folder)]

        folder = os.path.join(self.tmp, "elastic")
        port = free_port()
        a = self.agent(port, folder, "a")
        time.sleep(1)
        b = self.agent(port, folder, "b")
        self.wait_until("step 30", lambda: len(logged_steps(folder)) >= 30)
        # Stop one agent: SIGTERM reaches its workers, every rank saves the step it is at and
        # exits 4 (NOTE [Preemption]); the other agent restarts its workers on 2 ranks.
        stopped = time.monotonic()
        os.killpg(b.pid, signal.SIGTERM)
        b.wait(timeout=120)
        shrunk = re.compile(r"\[resume\] step (\d+) on a new layout: .*\(2 ranks;")
        self.wait_until("resume on 2 ranks", lambda: shrunk.search(self.read("a")))
        resumed_at = int(shrunk.search(self.read("a")).group(1))
        half = self.wait_until("a step on 2 ranks", lambda: len(logged_steps(folder)) > resumed_at)
        # Start it again: the running agent sees it waiting and restarts its workers with it.
        rejoined = time.monotonic()
        again = self.agent(port, folder, "b-again")
        grown = re.compile(r"\[resume\] step (\d+) on a new layout: .*\(4 ranks;.*\(2 ranks;")
        self.wait_until("resume on 4 ranks",
                        lambda: grown.search(self.read("a")) or grown.search(self.read("b-again")))
        grown_at = int((grown.search(self.read("a")) or grown.search(self.read("b-again"))).group(1))
        full = self.wait_until("a step on 4 ranks", lambda: len(logged_steps(folder)) > grown_at)
        self.assertEqual(a.wait(timeout=300), 0, self.read("a")[-3000:])
        self.assertEqual(again.wait(timeout=300), 0, self.read("b-again")[-3000:])
        entries = losses_by_step(folder)
        self.assertEqual([s for s, _ in entries], list(range(1, self.STEPS + 1)))
        error = max_error_against(entries, reference)
        print(f"torchrun elastic: agent B stopped at step {resumed_at} (its SIGTERM saved it), the "
              f"job resumed on 2 ranks and took its next step {half - stopped:.1f}s later; B "
              f"started again, the job grew back to 4 ranks at step {grown_at}, its next step "
              f"{full - rejoined:.1f}s after B started; {self.STEPS} steps against an uninterrupted "
              f"4-rank run: max relative loss error {error:.1e}")
        self.assertLess(error, 1e-10)


if __name__ == "__main__":
    unittest.main()

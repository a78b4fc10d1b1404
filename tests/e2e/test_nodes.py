"""Nodes that really leave (NOTE [Peer heartbeat]): two "nodes" in network namespaces of their own
(tests/e2e/netns.py: veth pairs on a bridge, their own addresses), 2 ranks each, started as Slurm
starts them (SLURM_* variables, rank 0's node first in SLURM_JOB_NODELIST) or by a torchrun agent
a node with an elastic c10d rendezvous.
  - a node's processes all SIGKILLed at once: a Slurm job stops, each survivor naming that node in
    one line; a torchrun job goes on with the survivors from the last commit, on the curve of an
    uninterrupted run (float64, 1e-10);
  - a partition (the node's link down): every rank gives up within comm.timeout_s plus the
    heartbeat's look, the survivors naming the unreachable node and the cut-off node saying it is
    cut off, the last commit intact, and a restart resumes it on the same curve;
  - a slow link (the node's outgoing rate held to 1 Mbit/s; this kernel has no netem, so a
    token-bucket filter stands in for a delay): rank 0's heartbeat warns naming the node, and
    `diagnose` of the flight dumps names it too.
Only addresses inside the namespaces; they are removed on any exit. Needs root (CI runs as root)."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import netns
from common import BINARY, SYSTEM_PYTHON, run, torchrun_missing
from live_run import CONFIG, EXACT, losses_by_step, max_error_against

TIMEOUT_S = 8
SLURM_JOB = 4242  # the store's port: 20000 + job id mod 20000
WATCH = ("--metrics.log_interval=1", "--eval.interval=0", "--eval.windows=1",
         f"--comm.timeout_s={TIMEOUT_S}")


def logged_steps(folder):
    try:
        return [step for step, _ in losses_by_step(folder)]
    except (FileNotFoundError, ValueError, KeyError):
        return []


class Nodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = netns.unavailable()
        if missing:
            raise unittest.SkipTest(missing)
        cls.tmp = tempfile.mkdtemp(prefix="vescale-nodes-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.net = netns.Network(2)
        self.addCleanup(self.net.close)
        self.a, self.b = self.net.nodes

    def log_path(self, name):
        return os.path.join(self.tmp, name + ".log")

    def read(self, name):
        with open(self.log_path(name), errors="replace") as f:
            return f.read()

    def slurm_job(self, name, folder, *args):
        """4 ranks as srun starts them, 2 a node; returns their processes, rank order."""
        nodelist = f"{self.a.address},{self.b.address}"
        procs = []
        for rank in range(4):
            env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="4",
                       SLURM_LOCALID=str(rank % 2), SLURM_NTASKS_PER_NODE="2",
                       SLURM_JOB_ID=str(SLURM_JOB), SLURM_JOB_NODELIST=nodelist)
            node = self.net.nodes[rank // 2]
            with open(self.log_path(f"{name}-r{rank}"), "w") as log:
                procs.append(node.popen([BINARY, "train", CONFIG, f"--job.dump_folder={folder}",
                                         *WATCH, *args], env=env, stdout=log,
                                        stderr=subprocess.STDOUT))
        return procs

    def wait_until(self, what, predicate, timeout=120):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} in {timeout} s")
            time.sleep(0.1)
        return time.monotonic()

    def wait_all(self, procs, timeout):
        """Exit codes, or None for a process still running after `timeout` s from now."""
        deadline = time.monotonic() + timeout
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def error_lines(self, name):
        return [line for line in self.read(name).splitlines() if line.startswith("error:")]

    def test_slurm_a_node_killed_stops_the_job_naming_it(self):
        folder = os.path.join(self.tmp, "killed")
        procs = self.slurm_job("killed", folder, "--training.steps=100000")
        self.wait_until("step 20", lambda: len(logged_steps(folder)) >= 20)
        killed = time.monotonic()
        self.net.kill(self.b)
        codes = self.wait_all(procs[:2], 60)
        took = time.monotonic() - killed
        self.assertEqual(codes, [1, 1], [self.read(f"killed-r{r}")[-2000:] for r in (0, 1)])
        for rank in (0, 1):
            errors = self.error_lines(f"killed-r{rank}")
            self.assertEqual(len(errors), 1, self.read(f"killed-r{rank}")[-2000:])
            self.assertRegex(errors[0], rf"ranks? [23](, 3)? on node {re.escape(self.b.address)} "
                                        r"sent no heartbeat to the store in 2\.5 s: that node died "
                                        r"or is cut off")
            print(f"node {self.b.address} SIGKILLed; rank {rank} exited 1 after {took:.1f} s: "
                  f"{errors[0]}")

    def test_slurm_a_partition_fails_every_rank_naming_the_peer_and_a_restart_resumes(self):
        steps = 60
        args = (*EXACT, "--comm.timeout_s=8", f"--training.steps={steps}",
                "--checkpoint.interval=10")
        reference_folder = os.path.join(self.tmp, "partition-reference")
        result = run("train", CONFIG, f"--job.dump_folder={reference_folder}", "--nproc", "4",
                     *args, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        reference = [loss for _, loss in losses_by_step(reference_folder)]

        folder = os.path.join(self.tmp, "partition")
        procs = self.slurm_job("cut", folder, *args)
        self.wait_until("step 25", lambda: len(logged_steps(folder)) >= 25)
        cut = time.monotonic()
        self.net.cut(self.b)
        codes = self.wait_all(procs, TIMEOUT_S + 30)
        took = time.monotonic() - cut
        self.assertEqual(codes, [1, 1, 1, 1], [self.read(f"cut-r{r}")[-1500:] for r in range(4)])
        self.assertLess(took, TIMEOUT_S + 15)
        for rank in range(4):
            errors = self.error_lines(f"cut-r{rank}")
            self.assertEqual(len(errors), 1, self.read(f"cut-r{rank}")[-2000:])
            if rank < 2:
                self.assertIn(f"on node {self.b.address} sent no heartbeat", errors[0])
            else:
                self.assertRegex(errors[0], r"this rank's heartbeat has not reached the store at "
                                            rf"{re.escape(self.a.address)}:\d+ for [\d.]+ s: this "
                                            rf"node \({re.escape(self.b.address)}\) is cut off")
            print(f"partition: rank {rank} exited 1 after {took:.1f} s: {errors[0]}")
        committed = max(int(m.group(1)) for m in re.finditer(r"saved \S+/step-0*(\d+)",
                                                              self.read("cut-r0")))

        self.net.mend(self.b)
        again = self.slurm_job("cut-again", folder, *args, "--checkpoint.load=latest")
        self.assertEqual(self.wait_all(again, 300), [0, 0, 0, 0],
                         self.read("cut-again-r0")[-3000:])
        resumed = re.search(r"loaded \S+ \([^,]+, step (\d+),", self.read("cut-again-r0"))
        self.assertIsNotNone(resumed, self.read("cut-again-r0")[-3000:])
        self.assertEqual(int(resumed.group(1)), committed)
        entries = losses_by_step(folder)
        self.assertEqual([s for s, _ in entries], list(range(1, steps + 1)))
        error = max_error_against(entries, reference)
        print(f"partition: the last commit, step {committed}, resumed after the link mended; "
              f"{steps} steps against an uninterrupted 4-rank run: max relative loss error "
              f"{error:.1e}")
        self.assertLess(error, 1e-10)

    def test_slurm_a_slow_link_is_named_by_the_heartbeat_and_diagnose(self):
        folder = os.path.join(self.tmp, "slow")
        procs = self.slurm_job("slow", folder, "--training.steps=100000")
        self.wait_until("step 10", lambda: len(logged_steps(folder)) >= 10)
        self.net.throttle(self.b, "1mbit")
        warning = re.compile(r"\[heartbeat\] a slow link: node (\S+) \(ranks ([\d, ]+)\) reaches "
                             r"the store in (\d+) ms, the other nodes in ([\d.]+) ms")
        warned = self.wait_until("a slow-link warning", lambda: warning.search(self.read("slow-r0")),
                                 timeout=90)
        found = warning.search(self.read("slow-r0"))
        self.assertEqual(found.group(1, 2), (self.b.address, "2, 3"))
        for proc in procs:
            os.kill(proc.pid, signal.SIGUSR1)
        flight = os.path.join(folder, "flight")
        self.wait_until("4 flight dumps", lambda: os.path.isdir(flight) and len(os.listdir(flight)) == 4,
                        timeout=30)
        time.sleep(0.5)
        diagnosis = run("diagnose", folder)
        self.assertEqual(diagnosis.returncode, 0, diagnosis.stderr)
        self.assertRegex(diagnosis.stdout, rf"slow link: node {re.escape(self.b.address)} \(ranks "
                                           r"2, 3\) reaches the store in \d+ ms")
        print(f"slow link to {self.b.address} (1 Mbit/s out): {found.group(0)}\n  diagnose: " +
              next(line for line in diagnosis.stdout.splitlines() if line.startswith("slow link")))


class TorchrunNodes(unittest.TestCase):
    STEPS = 120
    ARGS = (*EXACT, "--parallel.dp=auto", "--parallel.tp=1", f"--training.steps={STEPS}",
            "--checkpoint.interval=20", "--model.n_embd=128", "--model.n_layer=4",
            "--optimizer.lr=0.001", "--comm.timeout_s=8")

    def setUp(self):
        missing = netns.unavailable() or torchrun_missing()
        if missing:
            self.skipTest(missing)
        self.tmp = tempfile.mkdtemp(prefix="vescale-torchrun-nodes-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.net = netns.Network(2)
        self.addCleanup(self.net.close)

    def agent(self, node, folder, name, host):
        """One torchrun agent on `node`, 2 workers, in an elastic rendezvous at `host`'s address."""
        cmd = [SYSTEM_PYTHON, "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc_per_node",
               "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{host.address}:29400",
               "--rdzv_id", "nodes", "--rdzv_conf",
               "last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=2", "--max_restarts",
               "3", "--monitor_interval", "1", "--redirects", "1", "--tee", "1", "--no_python",
               BINARY, "train", CONFIG, f"--job.dump_folder={folder}", *self.ARGS,
               "--checkpoint.load=latest"]
        with open(os.path.join(self.tmp, name + ".log"), "w") as log:
            return node.popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def read(self, name):
        with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
            return f.read()

    def test_a_node_killed_the_survivors_go_on_from_the_last_commit(self):
        reference_folder = os.path.join(self.tmp, "reference")
        result = run("train", CONFIG, f"--job.dump_folder={reference_folder}", "--nproc", "4",
                     *self.ARGS, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        reference = [loss for _, loss in losses_by_step(reference_folder)]

        a, b = self.net.nodes
        folder = os.path.join(self.tmp, "elastic")
        first = self.agent(a, folder, "a", a)
        time.sleep(1)
        self.agent(b, folder, "b", a)
        deadline = time.monotonic() + 300
        while len(logged_steps(folder)) < 30:
            self.assertLess(time.monotonic(), deadline, self.read("a")[-3000:])
            time.sleep(0.1)
        killed = time.monotonic()
        self.net.kill(b)
        shrunk = re.compile(r"\[resume\] step (\d+) on a new layout: .*\(2 ranks;")
        while not shrunk.search(self.read("a")):
            self.assertLess(time.monotonic(), deadline + 120, self.read("a")[-4000:])
            time.sleep(0.1)
        resumed = time.monotonic()
        resumed_at = int(shrunk.search(self.read("a")).group(1))
        self.assertEqual(first.wait(timeout=300), 0, self.read("a")[-3000:])
        named = re.search(rf"ranks? [23](, 3)? on node {re.escape(b.address)} sent no heartbeat",
                          self.read("a"))
        self.assertIsNotNone(named, self.read("a")[-4000:])
        entries = losses_by_step(folder)
        self.assertEqual([s for s, _ in entries], list(range(1, self.STEPS + 1)))
        self.assertEqual(resumed_at % 20, 0)
        error = max_error_against(entries, reference)
        print(f"torchrun: node {b.address} (agent and 2 workers) SIGKILLed; the survivors named it "
              f"and {resumed - killed:.1f} s later resumed on 2 ranks from the commit of step "
              f"{resumed_at}; {self.STEPS} steps against an uninterrupted 4-rank run: max relative "
              f"loss error {error:.1e}")
        self.assertLess(error, 1e-10)


if __name__ == "__main__":
    unittest.main()

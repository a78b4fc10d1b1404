"""A vescale-train job running in the background, watched line by line: the tests of preemption,
restarts and chaos signal or kill its processes at moments they pick from its log."""
import os
import re
import subprocess
import threading
import time

from common import BINARY, metrics_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
# Float64, a learning rate that does not depend on training.steps (so a run of any length is the
# reference for its first steps), every step logged, no evaluation on the way.
EXACT = ("--training.dtype=float64", "--lr_scheduler.decay=constant", "--metrics.log_interval=1",
         "--eval.interval=0", "--eval.windows=2")


class LiveRun:
    """`vescale-train train CONFIG --job.dump_folder=FOLDER ARGS` started now; its stderr is read
    by a thread that records the workers' pids (per launch attempt), the steps rank 0 logged,
    and the launcher's restarts."""

    def __init__(self, folder, *args, env=None, prefix=()):
        self.folder = folder
        self.lines = []
        self.pids = {}  # rank -> pid of the current attempt
        self.attempt_pids = []  # one {rank: pid} per attempt
        self.steps = []  # (time, step) of each step line of rank 0
        self.restarts = []  # (time, restart number, "from step 20" / "from scratch")
        self.kills = []  # times a worker said it kills itself (VESCALE_TEST_DIE_AT_STEP)
        self.changed = threading.Condition()
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.start = time.monotonic()
        # `prefix`: a command that runs the launcher, e.g. ("timeout", "600").
        self.proc = subprocess.Popen([*prefix, BINARY, "train", CONFIG, f"--job.dump_folder={folder}",
                                      *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=full_env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            now = time.monotonic()
            with self.changed:
                self.lines.append(line)
                m = re.match(r"\[launch\] rank (\d+) pid (\d+)", line)
                if m:
                    rank, pid = int(m.group(1)), int(m.group(2))
                    if rank == 0:
                        self.attempt_pids.append({})
                    self.attempt_pids[-1][rank] = pid
                    self.pids = self.attempt_pids[-1]
                m = re.search(r"step (\d+)/\d+ \| loss", line)  # rank 0 logs them
                if m:
                    self.steps.append((now, int(m.group(1))))
                if "kills itself" in line:  # VESCALE_TEST_DIE_AT_STEP
                    self.kills.append(now)
                m = re.search(r"\[launch\] .*; restart (\d+) (?:of \d+|on \d+ ranks?(?: \(was \d+\))?) "
                              r"(from .*)$", line)
                if m:
                    self.restarts.append((now, int(m.group(1)), m.group(2)))
                self.changed.notify_all()

    def wait_for(self, predicate, timeout=120):
        """Waits until predicate(self) holds (checked on every line); fails after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise AssertionError("the run did not get there; its log:\n" + self.log()[-4000:])
                self.changed.wait(min(left, 0.5))

    def last_step(self):
        return self.steps[-1][1] if self.steps else 0

    def wait(self, timeout=300):
        """The exit code, once the launcher exited (killed if it outlives `timeout`)."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(timeout=10)
            self.proc.stderr.close()

    def log(self):
        return "".join(self.lines)


def losses_by_step(folder):
    """Every (step, loss) of FOLDER/metrics.jsonl in file order (a resumed run first drops the
    lines after its checkpoint's step, so each step appears once)."""
    return [(m["step"], m["loss"]) for m in metrics_lines(folder)]


def committed_steps(folder):
    root = os.path.join(folder, "checkpoints")
    if not os.path.isdir(root):
        return []
    return sorted(int(d[5:]) for d in os.listdir(root)
                  if d.startswith("step-") and os.path.exists(os.path.join(root, d, "COMMIT")))


def latest_step(folder):
    with open(os.path.join(folder, "checkpoints", "latest")) as f:
        return int(f.read().strip()[5:])


def max_error_against(entries, reference):
    """The largest relative error of (step, loss) entries against reference[step - 1]."""
    return max((abs(loss - reference[step - 1]) / abs(reference[step - 1])
                for step, loss in entries), default=0.0)

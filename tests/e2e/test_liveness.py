"""NOTE [Heartbeat] end to end: a rank that stops answering (SIGSTOP) or hangs outside any
collective is found by the local launcher, which stops the job and names that rank, not the
ranks that were waiting for it; the local rendezvous opens no port (NOTE [Local rendezvous]) and
a TCP one listens on MASTER_ADDR only (NOTE [Store bind address])."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from common import BINARY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")


def listening_addresses(pids):
    """"host:port" of the TCP sockets the processes `pids` listen on (from /proc: no tools)."""
    inodes = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as f:
            for row in f.readlines()[1:]:
                fields = row.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                    continue
                host_hex, port_hex = fields[1].split(":")
                raw = bytes.fromhex(host_hex)
                # /proc prints each 32-bit word in host (little-endian) order.
                words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]
                addr = b"".join(words)
                if v6 and addr[:12] == b"\0" * 10 + b"\xff\xff":
                    addr = addr[12:]
                host = ".".join(str(b) for b in addr) if len(addr) == 4 else addr.hex()
                out.append(f"{host}:{int(port_hex, 16)}")
    return out


class Job:
    """A training job of 4 ranks whose stderr is read as it comes."""

    def __init__(self, folder, *overrides, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [BINARY, "train", CONFIG, f"--job.dump_folder={folder}", "--training.steps=100000",
             "--metrics.log_interval=1", "--eval.interval=0", "--eval.windows=1", *overrides],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=full_env)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                match = re.search(pattern, line)
                if match:
                    return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines[-30:]))

    def pid_of(self, rank):
        return int(self.wait_for(rf"\[launch\] rank {rank} pid (\d+)").group(1))

    def finish(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        return code


class Liveness(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vescale-liveness-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_stopped_rank_is_named_within_seconds(self):
        job = Job(self.tmp, "--comm.timeout_s=120")
        pid = job.pid_of(2)
        job.wait_for(r"step 3/")
        os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        try:
            code = job.finish(timeout=60)
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        seconds = time.monotonic() - start
        failure = [l for l in job.lines if "[launch]" in l and "rank 2" in l and "heartbeat" in l]
        print(f"\nSIGSTOP of rank 2 (comm.timeout_s = 120): exit {code} after {seconds:.1f} s: "
              f"{failure[:1]}")
        self.assertNotEqual(code, 0)
        self.assertTrue(failure, "\n".join(job.lines[-20:]))
        self.assertLess(seconds, 25)

    def test_a_rank_stuck_outside_collectives_is_named_not_its_victims(self):
        job = Job(self.tmp, "--comm.timeout_s=8", env={"VESCALE_TEST_HANG_AT_STEP": "1:3"})
        job.wait_for(r"step 3/")
        start = time.monotonic()
        code = job.finish(timeout=90)
        seconds = time.monotonic() - start
        failure = [l for l in job.lines if "[launch]" in l and "rank 1" in l and "progress" in l]
        print(f"\nrank 1 hangs in compute (comm.timeout_s = 8): exit {code} after {seconds:.1f} s: "
              f"{failure[:1]}")
        self.assertNotEqual(code, 0)
        self.assertTrue(failure, "\n".join(job.lines[-20:]))
        self.assertLess(seconds, 8 + 15)

    def test_the_local_rendezvous_opens_no_port(self):
        job = Job(self.tmp)
        pids = [job.pid_of(rank) for rank in range(4)]
        job.wait_for(r"step 2/")
        addresses = listening_addresses(pids)
        job.proc.send_signal(signal.SIGKILL)
        job.finish(timeout=30)
        print(f"\nlistening sockets of the 4 workers: {addresses}")
        # Gloo's pairs listen on loopback only; nothing listens on every interface.
        for address in addresses:
            self.assertTrue(address.startswith("127.0.0.1:"), addresses)


    def test_a_tcp_rendezvous_listens_on_master_addr_only(self):
        # As Slurm starts them: rank 0 serves the TCP store at MASTER_ADDR:MASTER_PORT.
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        try:
            for rank in range(2):
                env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2",
                           SLURM_LOCALID=str(rank), SLURM_NTASKS_PER_NODE="2",
                           SLURM_JOB_NODELIST="localhost", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port))
                for var in ["RANK", "WORLD_SIZE"]:
                    env.pop(var, None)
                procs.append(subprocess.Popen(
                    [BINARY, "train", CONFIG, "--parallel.dp=1", "--parallel.tp=2",
                     f"--job.dump_folder={self.tmp}", "--training.steps=100000",
                     "--metrics.log_interval=1", "--eval.windows=1"],
                    env=env, stdout=subprocess.DEVNULL, text=True,
                    stderr=subprocess.PIPE if rank == 0 else subprocess.DEVNULL))
            deadline = time.monotonic() + 120
            for line in procs[0].stderr:  # rank 0 logs the steps
                if "step 2/" in line or time.monotonic() > deadline:
                    break
            addresses = listening_addresses([p.pid for p in procs])
        finally:
            for p in procs:
                p.kill()
                p.wait()
        print(f"\nSlurm-style launch, MASTER_ADDR=127.0.0.1:{port}: listening {addresses}")
        self.assertIn(f"127.0.0.1:{port}", addresses)
        for address in addresses:
            self.assertTrue(address.startswith("127.0.0.1:"), addresses)
    def test_a_port_held_by_another_server_fails_every_rank_naming_it(self):
        # Another program listens on MASTER_PORT: it accepts connections and never answers
        # (NOTE [Bounded rendezvous]). Both ranks of a Slurm-style 2-rank job must fail within
        # comm.timeout_s (plus c10d's own margin), naming the address; a SIGTERM while waiting
        # ends the wait too.
        import socket
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        try:
            def start(rank, timeout_s):
                env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2",
                           SLURM_LOCALID=str(rank), SLURM_NTASKS_PER_NODE="2",
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
                for var in ["RANK", "WORLD_SIZE"]:
                    env.pop(var, None)
                return subprocess.Popen(
                    [BINARY, "train", CONFIG, "--parallel.dp=1", "--parallel.tp=2",
                     f"--job.dump_folder={self.tmp}", f"--comm.timeout_s={timeout_s}"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            started = time.monotonic()
            procs = [start(rank, 3) for rank in range(2)]
            outcomes = []
            for rank, p in enumerate(procs):
                _, err = p.communicate(timeout=60)
                seconds = time.monotonic() - started
                last = err.strip().splitlines()[-1]
                outcomes.append((rank, p.returncode, seconds, last))
                print(f"\nrank {rank}: exit {p.returncode} after {seconds:.1f}s: {last}")
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(f"127.0.0.1:{port}", last)
            # comm.timeout_s, c10d's margin of 5 s, and the start-up of a process on a loaded
            # machine.
            self.assertLess(max(s for _, _, s, _ in outcomes), 3 + 5 + 15)
            # A stop request while rank 1 waits (comm.timeout_s long) ends it at once. Signalled
            # once it has connected (so in the rendezvous, its stop handler installed); a fresh
            # server, whose backlog holds no connection of the ranks above.
            server.close()
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen(8)
            server.settimeout(120)
            p = start(1, 300)
            connection, _ = server.accept()
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=30)
            last = err.strip().splitlines()[-1]
            print(f"rank 1 waiting, SIGTERM: exit {p.returncode}: {last}")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("stopped by signal 15", last)
            connection.close()
        finally:
            server.close()


if __name__ == "__main__":
    unittest.main()

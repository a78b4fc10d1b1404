"""`vescale-train comm bench` on real processes, and the launcher's supervision."""
import os
import re
import signal
import subprocess
import threading
import time
import unittest

from common import BINARY, parse_table, run

def alive(pid):
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]


class CommBench(unittest.TestCase):
    def test_four_processes_on_a_2x2_mesh(self):
        result = run("comm", "bench", "--nproc", "4", "--mesh", "pp=1,dp=2,tp=2",
                     "--sizes", "1K,64K", "--iters", "5")
        print(result.stdout)
        self.assertEqual(result.returncode, 0, result.stderr)
        rows, _ = parse_table(result.stdout)
        seen = {(r[0], r[1], r[2]): r for r in rows}
        for dim in ["dp", "tp"]:
            for op in OPS:
                for size in ["1KiB", "64KiB"]:
                    row = seen.get((dim, op, size))
                    self.assertIsNotNone(row, f"missing row {dim} {op} {size}")
                    self.assertEqual(row[-1], "ok", row)
        # Counted bytes per rank follow NOTE [Communication volume] for groups of 2:
        # all_reduce 2(n-1)/n S = S; all_gather (n-1)·S/n; broadcast: rank 0 is the root, (n-1)·S.
        self.assertEqual(seen[("tp", "all_reduce", "64KiB")][-2], "64KiB")
        self.assertEqual(seen[("tp", "all_gather", "64KiB")][-2], "32KiB")
        self.assertEqual(seen[("dp", "reduce_scatter", "64KiB")][-2], "32KiB")
        self.assertEqual(seen[("dp", "broadcast", "64KiB")][-2], "64KiB")
        self.assertIn("size-1 dims are free and skipped: pp", result.stdout)
        # Worker logs come back prefixed with their rank.
        self.assertRegex(result.stderr, r"\[rank [0-3]\]")

    def test_three_processes_uneven_world(self):
        result = run("comm", "bench", "--nproc", "3", "--sizes", "4K", "--iters", "3",
                     "--ops", "all_gather,reduce_scatter,all_to_all")
        self.assertEqual(result.returncode, 0, result.stderr)
        rows, _ = parse_table(result.stdout)
        self.assertEqual(len(rows), 3)
        self.assertTrue(all(r[0] == "world" and r[-1] == "ok" for r in rows), rows)

    def test_single_process_has_nothing_to_measure(self):
        result = run("comm", "bench", "--nproc", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("nothing to measure", result.stdout)

    def test_mesh_that_does_not_fit_the_processes(self):
        result = run("comm", "bench", "--nproc", "3", "--mesh", "dp=2,tp=2")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--mesh dp=2,tp=2 has 4 ranks but 3 processes are running", result.stderr)

    def test_bad_arguments_name_the_option(self):
        for args, needle in [(["--sizes", "1X"], "--sizes"), (["--ops", "all_reduc"], "all_reduc"),
                             (["--mesh", "tp=0"], "--mesh")]:
            result = run("comm", "bench", "--nproc", "2", *args)
            self.assertNotEqual(result.returncode, 0, args)
            self.assertIn(needle, result.stderr, args)

    def test_help_on_every_command(self):
        for args in [[], ["comm"], ["comm", "bench"]]:
            result = run(*args, "--help")
            self.assertEqual(result.returncode, 0, args)
            self.assertIn("Usage", result.stdout)


class Supervision(unittest.TestCase):
    def test_killed_worker_stops_the_job_and_is_named(self):
        """SIGKILL one worker mid-run: the launcher stops the rest and exits naming the rank."""
        pids, lines = {}, []
        started = threading.Event()
        with subprocess.Popen(
                [BINARY, "comm", "bench", "--nproc", "4", "--sizes", "1M", "--iters", "100000",
                 "--ops", "all_reduce", "--timeout", "20"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:

            def read_stderr():
                for line in proc.stderr:
                    lines.append(line)
                    m = re.match(r"\[launch\] rank (\d+) pid (\d+)", line)
                    if m:
                        pids[int(m.group(1))] = int(m.group(2))
                    if "comm bench on" in line:
                        started.set()

            reader = threading.Thread(target=read_stderr, daemon=True)
            reader.start()
            try:
                self.assertTrue(started.wait(60), "bench did not start:\n" + "".join(lines))
                time.sleep(1.0)  # inside the timed loop now
                victim = 2
                os.kill(pids[victim], signal.SIGKILL)
                killed_at = time.monotonic()
                code = proc.wait(timeout=60)
                elapsed = time.monotonic() - killed_at
            finally:
                if proc.poll() is None:
                    proc.kill()
            reader.join(timeout=5)
        stderr = "".join(lines)
        print(f"launcher exited {code} {elapsed:.2f}s after the kill")
        self.assertNotEqual(code, 0)
        self.assertLess(elapsed, 30)
        self.assertIn(f"rank {victim} (pid {pids[victim]}) was killed by signal 9", stderr)
        # No worker survives the launcher.
        for pid in pids.values():
            self.assertFalse(alive(pid), f"worker pid {pid} outlived the launcher")

    def test_failing_worker_exit_code_and_last_line(self):
        """A worker that fails on its own is reported with its exit code and last line."""
        result = run("comm", "bench", "--nproc", "2", "--backend", "bogus", timeout=120)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertRegex(result.stderr, r"rank \d \(pid \d+\) exited with code 2; its last line: "
                                        r"error: \[comm\] unknown backend 'bogus'")


if __name__ == "__main__":
    unittest.main()

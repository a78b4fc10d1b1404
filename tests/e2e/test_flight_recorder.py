"""NOTE [Flight recorder] and NOTE [Profile trace] end to end, on 4 real processes: a rank made to
hang before a chosen collective is diagnosed by the launcher (and by `diagnose`) naming the rank,
its group and the sequence number; dumps on demand (comm.flight_recorder_dump, SIGUSR1) show a job
in step; `train --profile` writes a Chrome trace whose phases cover each step."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from common import BINARY, TINY_GPT, run, write_config

# pp 2 x tp 2: rank 3 is stage 1's second tp rank (tp group [2, 3], pp group [1, 3]).
PIPELINE = TINY_GPT + """
[job]
name = "flight"
[parallel]
pp = 2
tp = 2
microbatches = 2
plan = "gpt/megatron-tp"
[training]
steps = 100000
global_batch_size = 4
seq_len = 16
[metrics]
log_interval = 1
"""


def dumps(folder):
    flight = os.path.join(folder, "flight")
    found = {}
    for name in sorted(os.listdir(flight)):
        if name.endswith(".json"):
            with open(os.path.join(flight, name)) as f:
                found[name] = json.load(f)
    return found


class FlightRecorder(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vescale-flight-")
        self.config = write_config(self.tmp, PIPELINE)
        self.dump = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_rank_that_never_enters_a_collective_is_named_with_its_group_and_number(self):
        seq = 25  # rank 3's 25th collective of its tp group, in step 2 or 3
        start = time.monotonic()
        result = run("train", self.config, f"--job.dump_folder={self.dump}",
                     "--comm.timeout_s=8", timeout=120,
                     env={"VESCALE_TEST_HANG_AT_COLLECTIVE": f"3:tp:{seq}"})
        seconds = time.monotonic() - start
        self.assertNotEqual(result.returncode, 0)
        diagnosis = result.stderr[result.stderr.find("[diagnose]"):]
        print(f"\nrank 3 hangs before tp collective #{seq}: exit {result.returncode} after "
              f"{seconds:.1f} s; the launcher's diagnosis:\n{diagnosis}")
        tp = re.search(rf"^tp group \[2, 3\]: rank 2 (is|was) in (\w+) #{seq} of step (\d+) "
                       rf"\(micro-batch \d, .*rank 3 never entered it \(it reached #{seq - 1}\), "
                       rf"its last call was .*$", diagnosis, re.M)
        self.assertTrue(tp, diagnosis)
        self.assertIn("likely cause: rank 3 is in no call of comm/", diagnosis)
        self.assertEqual(sorted(dumps(self.dump)), [f"rank-{r}.json" for r in range(4)])
        # The same diagnosis for torchrun and Slurm users, from the dump folder.
        again = run("diagnose", self.dump)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn(tp.group(0), again.stdout)
        self.assertLess(seconds, 60)

    def test_a_dump_after_a_step_shows_every_group_in_step(self):
        result = run("train", self.config, f"--job.dump_folder={self.dump}",
                     "--training.steps=3", "--comm.flight_recorder_dump=2", timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        found = dumps(self.dump)
        self.assertEqual(len(found), 4)
        for name, d in found.items():
            self.assertIn("comm.flight_recorder_dump = 2", d["reason"])
            self.assertTrue(d["entries"], name)
            self.assertEqual(d["entries"][-1]["step"], 2)
            self.assertTrue(all(e["state"] in ("done", "posted") for e in d["entries"]))
        # Members number their group's collectives alike: same call, same bytes.
        by_call = {}
        for d in found.values():
            for e in d["entries"]:
                g = d["groups"][e["group"]]
                if not e["transfer"]:
                    key = (g["key"], e["seq"])
                    by_call.setdefault(key, set()).add((e["op"], e["bytes"]))
        self.assertTrue(by_call)
        for key, calls in by_call.items():
            self.assertEqual(len(calls), 1, key)
        text = run("diagnose", self.dump).stdout
        print(f"\n{text}")
        self.assertIn("in step: ", text)
        self.assertNotIn("likely cause", text)
        self.assertNotIn("never entered", text)

    def test_sigusr1_to_the_launcher_dumps_every_rank_and_the_job_goes_on(self):
        proc = subprocess.Popen([BINARY, "train", self.config, f"--job.dump_folder={self.dump}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()

        def wait_for(pattern, timeout=90):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for i, line in enumerate(list(lines)):
                    if re.search(pattern, line):
                        return i
                time.sleep(0.05)
            raise AssertionError(f"no {pattern!r} in:\n" + "".join(lines[-20:]))

        try:
            wait_for(r"step 2/")
            proc.send_signal(signal.SIGUSR1)
            at = wait_for(r"^\[diagnose\]")
            step_then = len([l for l in lines if "step " in l and "| loss" in l])
            wait_for(rf"step {step_then + 2}/")  # still training
        finally:
            proc.kill()
            proc.wait()
            reader.join(timeout=10)
            proc.stderr.close()
        diagnosis = "".join(lines[at:at + 12])
        print(f"\nSIGUSR1 to the launcher:\n{diagnosis}")
        found = dumps(self.dump)
        self.assertEqual(len(found), 4)
        for d in found.values():
            self.assertIn("SIGUSR1", d["reason"])
        self.assertIn("dumps of 4 of 4 ranks", diagnosis)
        self.assertNotIn("likely cause", diagnosis)


class ProfileTrace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vescale-profile-")
        self.config = write_config(self.tmp, PIPELINE)
        self.dump = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_the_trace_parses_and_its_phases_cover_each_step(self):
        profiled = [2, 3, 4, 5]
        result = run("train", self.config, f"--job.dump_folder={self.dump}",
                     "--training.steps=6", "--profile", "2-5", timeout=180)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        with open(os.path.join(self.dump, "trace.json")) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        spans = [e for e in events if e["ph"] == "X"]
        self.assertEqual({e["pid"] for e in spans}, {0, 1, 2, 3})
        names = {e["name"] for e in spans if e["cat"] == "phase"}
        for phase in ("forward", "backward", "bubble", "grad sync", "optimizer"):
            self.assertIn(phase, names)
        comm = [e for e in spans if e["cat"] == "comm"]
        self.assertTrue(any(e["name"].startswith("all_reduce tp #") for e in comm))
        self.assertTrue(any(e["name"].startswith("send pp #") for e in comm))
        report = []
        for rank in range(4):
            steps = [e for e in spans if e["pid"] == rank and e["cat"] == "step"]
            self.assertEqual([s["args"]["step"] for s in steps], profiled)
            ratios = []
            for step in steps:
                begin, end = step["ts"], step["ts"] + step["dur"]
                phases = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans
                                if e["pid"] == rank and e["cat"] == "phase"
                                and e["args"]["step"] == step["args"]["step"])
                self.assertTrue(phases)
                # The union of the phases (a bubble may sit inside a forward) inside the step.
                covered, reach = 0.0, begin
                for a, b in phases:
                    self.assertGreaterEqual(a, begin - 1)
                    self.assertLessEqual(b, end + 1)
                    a = max(a, reach)
                    if b > a:
                        covered += b - a
                        reach = b
                ratios.append(covered / step["dur"])
            report.append(f"rank {rank}: " + ", ".join(f"{r:.3f}" for r in ratios))
            # Work left out of the phases shows in every step of the rank; a time slice the
            # scheduler takes between two phases (CI runs tests side by side on few cores) lands
            # in some steps only. So the rank's best step is held to the mark, not each step.
            self.assertGreater(max(ratios), 0.95, report[-1])
        print(f"\nphases / step time, steps {profiled[0]}-{profiled[-1]}: " + "; ".join(report))


if __name__ == "__main__":
    unittest.main()

"""The peers tables' decisions: settings from the environment, thread candidates, each row's
command, round-robin runs, and the table of fastest candidates and per-round ratios."""
import contextlib
import io
import unittest

import benchsuite_path  # noqa: F401
from benchsuite.peers import commands, rounds, settings, table
from benchsuite.tables import peers

# What the old scripts/bench.sh's peer_table printed for Table.RUNS and test_lines' rows.
PRINTED = """\
row                       tokens/s         min-max  peak RSS  vs. peer (tokens/s, peak RSS)                              threads
torch eager 1 process       17,943   17,244-18,642   985 MiB                                                             OMP_NUM_THREADS=2
vescale 1 process           15,106   14,657-15,554   298 MiB  0.84x, 0.30x torch eager 1 process                         defaults
plain libtorch 1 process    13,238   12,585-13,891   314 MiB  vescale overhead -12.4%                                    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2
torch DDP 2 processes       failed
  torch eager 1 process by round: 18,642 (980 MiB), 17,244 (990 MiB)
  torch eager 1 process candidates: OMP_NUM_THREADS=1: 15,500; OMP_NUM_THREADS=2: 17,943
  vescale 1 process by round: 15,554 (295 MiB), 14,657 (300 MiB)
  plain libtorch 1 process by round: 13,891 (314 MiB), 12,585 (314 MiB)
"""
PROGRAMS = commands.Programs("/usr/bin/python3", "/env/python", "/b/plain", "/b/train", "/w/train")


class Settings(unittest.TestCase):
    def test_defaults_and_empty_lists(self):
        s = settings.from_env({})
        self.assertEqual((s.rounds, s.steps, s.one_envs, s.two_envs, s.py_args),
                         (3, 40, "OMP_NUM_THREADS=1;OMP_NUM_THREADS=2", "OMP_NUM_THREADS=1", "--foreach"))
        s = settings.from_env({"PEER_ROUNDS": "1", "PEER_STEPS": "", "PEER_1_ENVS": "", "PEER_PY_ARGS": ""})
        self.assertEqual((s.rounds, s.steps, s.one_envs, s.py_args), (1, 40, "", ""))

    def test_candidates(self):
        self.assertEqual(settings.candidates("torch eager 1 process", "eager", "A=1;A=2 B=1"),
                         [("torch eager 1 process [A=1]", "eager", "A=1"),
                          ("torch eager 1 process [A=2 B=1]", "eager", "A=2 B=1")])
        self.assertEqual(settings.candidates("vescale dp=2", "dp2", ""), [("vescale dp=2", "dp2", "")])

    def test_run_env_clears_the_thread_variables(self):
        env = settings.run_env({"OMP_NUM_THREADS": "4", "MALLOC_TOP_PAD_": "1", "PATH": "/bin"},
                               "OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 ")
        self.assertEqual(env, {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"})


class Commands(unittest.TestCase):
    def test_vescale_rows(self):
        cmd = commands.command("wheel-zero3@bf16", PROGRAMS, 40, "--foreach", "/o/peer-zero3")
        self.assertEqual(cmd[:2], ["/w/train", "train"])
        self.assertIn("--training.dtype=bfloat16", cmd)
        self.assertEqual(cmd[-4:], ["--parallel.dp=2", "--parallel.tp=1",
                                    "--parallel.plan=gpt/dp-only", "--parallel.zero=3"])
        self.assertIn("--metrics.log_interval=40", cmd)

    def test_peer_rows(self):
        self.assertEqual(commands.command("ddp", PROGRAMS, 5, "--foreach --x", "/d"),
                         ["/usr/bin/python3", commands.PEER, *commands.gpt_args(5, "float32"),
                          "--nproc", "2", "--foreach", "--x"])
        self.assertEqual(commands.command("fsdp", PROGRAMS, 5, "", "/d")[-4:],
                         ["--foreach", "--nproc", "2", "--fsdp"])
        self.assertEqual(commands.command("plain", PROGRAMS, 5, "", "/d"),
                         ["/b/plain", *commands.gpt_args(5, "float32")])
        with self.assertRaises(KeyError):
            commands.command("nope", PROGRAMS, 5, "", "/d")


class Rounds(unittest.TestCase):
    def test_round_robin_with_a_shared_run_and_a_failure(self):
        calls = []

        def run(row, setting):
            calls.append((row, setting))
            return None if row == "bad" else (100.0 * len(calls), 200.0)
        specs = [("a", "r", "X=1"), ("a again", "r", "X=1"), ("b", "bad", "")]
        progress = io.StringIO()
        with contextlib.redirect_stderr(progress):
            runs = rounds.rounds(specs, 2, run)
        self.assertIn("  round 2/2: b: failed", progress.getvalue().splitlines())
        self.assertEqual(calls, [("r", "X=1"), ("bad", ""), ("r", "X=1"), ("bad", "")])
        self.assertEqual(runs, {"a": [(100.0, 200.0), (300.0, 200.0)],
                                "a again": [(100.0, 200.0), (300.0, 200.0)], "b": []})

    def test_result_of_a_run(self):
        self.assertEqual(rounds.result("done: 3 steps, 7286 tokens/s\nmax RSS KiB 302079\n"),
                         (7286.0, 294.0))
        self.assertIsNone(rounds.result("Traceback\nmax RSS KiB 1000\n"))


class Table(unittest.TestCase):
    RUNS = {
        "torch eager 1 process [OMP_NUM_THREADS=1]": [(15000.0, 900.0), (16000.0, 910.0)],
        "torch eager 1 process [OMP_NUM_THREADS=2]": [(18642.0, 980.0), (17244.0, 990.0)],
        "vescale 1 process": [(15554.0, 295.0), (14657.0, 300.0)],
        "plain libtorch 1 process [OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2]": [(13891.0, 314.0), (12585.0, 314.0)],
        "torch DDP 2 processes [OMP_NUM_THREADS=1]": [],
    }

    def test_best_candidate(self):
        m, _, setting = table.best(self.RUNS, "torch eager 1 process")
        self.assertEqual((m, setting), (17943.0, "OMP_NUM_THREADS=2"))
        self.assertEqual(table.best(self.RUNS, "vescale 1 process")[2], "defaults")
        self.assertIsNone(table.best(self.RUNS, "torch DDP 2 processes"))

    def test_lines(self):
        specs = [("torch eager 1 process", [], ""),
                 ("vescale 1 process", ["torch eager 1 process"], ""),
                 ("plain libtorch 1 process", ["vescale 1 process"], "overhead"),
                 ("torch DDP 2 processes", [], "")]
        self.assertEqual("\n".join(table.lines(self.RUNS, specs)) + "\n", PRINTED)

    def test_grid_rows_leave_the_threads_column_empty(self):
        self.assertEqual(table.lines(self.RUNS, [("torch eager 1 process", [], "grid")])[1],
                         "torch eager 1 process    17,943   17,244-18,642   985 MiB" + " " * 61)

    def test_no_row_finished(self):
        self.assertEqual(table.lines({"x": []}, [("x", [], "")])[1:], ["x    failed", ""])


class PeersTable(unittest.TestCase):
    def test_rows_without_the_wheel_build(self):
        labels = [label for label, _, _ in peers.peer_rows(wheel=False, bf16=False)]
        self.assertEqual(len(labels), 10)
        self.assertFalse(any("wheel" in label for label in labels))
        self.assertEqual(len(peers.peer_rows(wheel=True, bf16=True)), 18)

    def test_specs_name_every_candidate(self):
        s = settings.from_env({})
        specs = peers.peer_specs(s, "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2 OPENBLAS_CORETYPE=SkylakeX",
                                 wheel=True, bf16=False)
        names = [name for name, _, _ in specs]
        self.assertIn("vescale tp=2 megatron-sp (wheel LibTorch)", names)
        self.assertIn(("torch.compile 1 process [OMP_NUM_THREADS=2]", "compile", "OMP_NUM_THREADS=2"), specs)
        self.assertEqual(len(specs), 2 + 2 + 2 + 1 + 1 + 2 + 1 + 2 + 1 + 2)

    def test_thread_grid(self):
        specs = peers.thread_specs()
        self.assertEqual(len(specs), 9 * 2 + 1 + 6)
        self.assertIn(("python 1 process threads - blas 2", "py1", "OPENBLAS_NUM_THREADS=2"), specs)
        self.assertIn(("python DDP threads 2 blas -", "ddp", "OMP_NUM_THREADS=2 "), specs)


if __name__ == "__main__":
    unittest.main()

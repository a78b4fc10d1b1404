"""A run's dump folder and resuming into it ([16] items 2, 3, 5, 6, 7; NOTE [One run per dump
folder]): one live run per folder whatever the checkpoint settings, metrics.jsonl lines that carry
their run id and never mix runs or follow a link, the last step saved, a rollback decided before
the first step (metrics.jsonl's lines after it dropped), `latest` with nothing saved yet, and the
architecture a checkpoint was trained with compared key by key. One process, a tiny float64
GPT."""
import fcntl
import json
import os
import shutil
import tempfile
import unittest

from common import TINY_GPT, metrics_lines, run, write_config

CONFIG_TEXT = TINY_GPT + """
[training]
steps = 4
global_batch_size = 4
seq_len = 16
dtype = "float64"
[checkpoint]
keep = 0
[metrics]
log_interval = 1
"""


def steps_in(folder):
    ckpt = os.path.join(folder, "checkpoints")
    return sorted(d for d in os.listdir(ckpt) if d.startswith("step-")) if os.path.isdir(ckpt) else []


class RunFolder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-run-folder-")
        cls.config = write_config(cls.tmp, CONFIG_TEXT)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train(self, folder, *args):
        return run("train", self.config, f"--job.dump_folder={folder}", *args, timeout=120)

    def ok(self, folder, *args):
        result = self.train(folder, *args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result

    def refused(self, folder, *args):
        """A clear error: exit 2, its last line returned."""
        result = self.train(folder, *args)
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        return result.stderr.strip().splitlines()[-1]

    # Item 5
    def test_the_last_step_is_saved_with_an_interval(self):
        folder = os.path.join(self.tmp, "last-step")
        self.ok(folder, "--training.steps=5", "--checkpoint.interval=2")
        self.assertEqual(steps_in(folder), ["step-000002", "step-000004", "step-000005"])
        print("steps=5, interval=2 saves", steps_in(folder))

    # Item 2
    def test_a_changed_architecture_or_optimizer_is_refused_on_resume(self):
        folder = os.path.join(self.tmp, "arch")
        self.ok(folder, "--training.steps=2", "--checkpoint.interval=2")
        step2 = os.path.join(folder, "checkpoints", "step-000002")
        for key, value, saved in [("model.n_head", "2", "4"), ("model.n_embd", "32", "16"),
                                  ("model.dropout", "0.1", "0.0"),
                                  ("model.block_size", "32", "16")]:
            line = self.refused(folder, "--checkpoint.load=latest", "--training.steps=4",
                                f"--{key}={value}")
            self.assertIn(f"{key} = {value} in this job's config", line)
            self.assertIn(f"trained with {key} = {saved}", line)
            self.assertIn(step2, line)
            print(f"--{key}={value} on resume:", line)
        line = self.refused(folder, "--checkpoint.load=latest", "--training.steps=4",
                            "--optimizer.name=sgd")
        self.assertIn("optimizer.name = 'sgd' in this job's config", line)
        self.assertNotIn("model-only", line)
        print("--optimizer.name=sgd on resume:", line)
        # eval compares the model too (not the dropout, which evaluation does not use).
        result = run("eval", self.config, f"--checkpoint={step2}", "--model.n_head=2")
        self.assertEqual(result.returncode, 2, result.stderr[-2000:])
        self.assertIn("model.n_head = 2 in this job's config", result.stderr)
        result = run("eval", self.config, f"--checkpoint={step2}", "--model.dropout=0.1")
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        # The same architecture resumes, also with a vocabulary padded to the same rows by
        # another vocab_multiple (vocab 32 padded to 32 either way).
        self.ok(folder, "--checkpoint.load=latest", "--training.steps=4", "--optimizer.lr=1e-3",
                "--model.vocab_multiple=16")

    # Item 6
    def test_a_rollback_is_decided_before_the_first_step(self):
        folder = os.path.join(self.tmp, "rollback")
        self.ok(folder, "--training.steps=4", "--checkpoint.interval=2")
        step2 = os.path.join(folder, "checkpoints", "step-000002")
        lines = len(metrics_lines(folder))
        line = self.refused(folder, f"--checkpoint.load={step2}", "--checkpoint.interval=2")
        self.assertIn("newer than step 2", line)
        self.assertIn("step-000004", line)
        self.assertEqual(len(metrics_lines(folder)), lines, "steps were trained before refusing")
        print("rollback to step 2 beside step 4:", line)
        result = self.ok(folder, f"--checkpoint.load={step2}", "--checkpoint.interval=2",
                         "--checkpoint.overwrite=true")
        self.assertIn("newer than step 2 (a rollback)", result.stderr)
        self.assertEqual(steps_in(folder), ["step-000002", "step-000004"])
        # The rolled-back steps' lines were dropped and written again: one line per step.
        self.assertIn("metrics.jsonl: dropped 2 lines after step 2", result.stderr)
        self.assertEqual([m["step"] for m in metrics_lines(folder)], [1, 2, 3, 4])

    # Item 7
    def test_latest_with_nothing_saved_starts_from_scratch(self):
        folder = os.path.join(self.tmp, "latest-empty")
        result = self.ok(folder, "--checkpoint.load=latest", "--checkpoint.interval=2")
        self.assertIn("holds no committed checkpoint yet; starting from step 0", result.stderr)
        self.assertEqual([m["step"] for m in metrics_lines(folder)], [1, 2, 3, 4])
        # Now there is one: latest resumes from it.
        result = self.ok(folder, "--checkpoint.load=latest", "--training.steps=6")
        self.assertIn("step-000004", result.stderr)
        # An explicit path that does not exist stays an error.
        missing = os.path.join(self.tmp, "no-such-step")
        line = self.refused(os.path.join(self.tmp, "explicit"), f"--checkpoint.load={missing}")
        self.assertIn(missing, line)
        print("explicit missing checkpoint:", line)

    # Item 3
    def test_one_live_run_per_dump_folder_whatever_the_checkpoint_settings(self):
        folder = os.path.join(self.tmp, "locked")
        os.makedirs(folder)
        with open(os.path.join(folder, "LOCK"), "w") as f:
            f.write("host otherhost pid 4242\n")
            f.flush()
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            line = self.refused(folder, "--checkpoint.interval=0")
            self.assertIn("is locked by another job (host otherhost pid 4242)", line)
            print("checkpoint.interval = 0 while another job holds LOCK:", line)
        self.assertFalse(os.path.exists(os.path.join(folder, "metrics.jsonl")))

    def test_metrics_lines_carry_the_run_id_and_never_mix_runs(self):
        folder = os.path.join(self.tmp, "metrics")
        self.ok(folder)
        first = metrics_lines(folder)
        first_id = first[0]["run_id"]
        self.assertRegex(first_id, r"^[0-9a-f]{16}$")
        self.ok(folder)
        second = metrics_lines(folder)
        ids = {m["run_id"] for m in second}
        self.assertEqual(len(ids), 1)
        self.assertNotEqual(ids, {first_id})
        with open(os.path.join(folder, f"metrics.{first_id}.jsonl")) as f:
            moved = [json.loads(l) for l in f]
        self.assertEqual(moved, first)
        print(f"two runs into one folder: metrics.jsonl holds run {ids.pop()}'s {len(second)} "
              f"lines; run {first_id}'s {len(moved)} moved to metrics.{first_id}.jsonl")

    def test_a_link_at_metrics_jsonl_is_not_followed(self):
        folder = os.path.join(self.tmp, "metrics-link")
        os.makedirs(folder)
        target = os.path.join(self.tmp, "elsewhere.txt")
        with open(target, "w") as f:
            f.write("precious\n")
        os.symlink(target, os.path.join(folder, "metrics.jsonl"))
        line = self.refused(folder)
        self.assertIn("is a symbolic link", line)
        with open(target) as f:
            self.assertEqual(f.read(), "precious\n")
        print("metrics.jsonl a link:", line)


if __name__ == "__main__":
    unittest.main()

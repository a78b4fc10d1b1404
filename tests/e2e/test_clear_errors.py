"""Mistakes that must be one clear error line, exit 2, with nothing written ([16] item 11): a float
beyond float32's range, an empty dump folder, merge to an empty name, eval of `latest` with
nothing saved, of a dump folder (resolved to its newest step), of one rank's file, and a launcher
that started fewer processes than the mesh needs. Also: lint and train agree on a plan whose
attention input is batch-sharded."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from common import BINARY, TINY_GPT_TWO_STEPS, run, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG_TEXT = TINY_GPT_TWO_STEPS


class ClearErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-errors-")
        cls.config = write_config(cls.tmp, CONFIG_TEXT)
        cls.trained = os.path.join(cls.tmp, "trained")
        result = run("train", cls.config, f"--job.dump_folder={cls.trained}", "--parallel.tp=2")
        assert result.returncode == 0, result.stderr[-3000:]
        cls.step = os.path.join(cls.trained, "checkpoints", "step-000002")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def one_error(self, *args, cwd=None, env=None, needle):
        """Runs vescale-train ARGS in `cwd` (a fresh folder by default), expects exit 2 and one
        error line holding `needle`, and that nothing was written in `cwd`."""
        cwd = cwd or tempfile.mkdtemp(dir=self.tmp)
        full_env = dict(os.environ, **(env or {}))
        result = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=120,
                                cwd=cwd, env=full_env)
        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        print(f"{' '.join(args)[-70:]}: exit {result.returncode}: {errors[:1]}")
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        self.assertEqual(len(errors), 1, result.stderr[-3000:])
        self.assertIn(needle, errors[0])
        self.assertEqual(os.listdir(cwd), [], "an error wrote files")
        return errors[0]

    def test_a_float_beyond_float32(self):
        self.one_error("train", self.config, "--job.dump_folder=out", "--optimizer.lr=1e39",
                       needle="key 'optimizer.lr' = 1e+39 is beyond float32's range")

    def test_an_empty_dump_folder(self):
        self.one_error("train", self.config, "--job.dump_folder=",
                       needle="job.dump_folder is empty")

    def test_recompute_without_transformer_blocks(self):
        mlp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                           "mlp-tp.toml")
        self.one_error("train", mlp, "--job.dump_folder=out",
                       "--training.activation_checkpoint=full",
                       needle='model.name = "mlp" has none; set it to "none"')

    def test_context_parallelism_that_cannot_split(self):
        mlp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                           "mlp-tp.toml")
        self.one_error("train", mlp, "--job.dump_folder=out", "--parallel.cp=2",
                       needle='model.name = "mlp" has none; set parallel.cp = 1')
        self.one_error("plan", "lint", self.config, "--parallel.cp=3",
                       needle="does not split into 2 x parallel.cp = 6 equal chunks")

    def test_merge_to_an_empty_name(self):
        self.one_error("merge", self.step, "-o", "", needle="merge: -o '' is not a file name")
        self.one_error("merge", self.step, "-o", "no/such/folder/model.h5",
                       needle="no folder")

    def test_eval_latest_with_nothing_saved(self):
        self.one_error("eval", self.config, "--checkpoint=latest", "--job.dump_folder=fresh",
                       needle="holds no committed checkpoint")

    def test_eval_of_a_rank_file_names_its_step_folder(self):
        self.one_error("eval", self.config, f"--checkpoint={self.step}/rank-00001.h5",
                       "--parallel.tp=2",
                       needle=f"one rank's file of a sharded checkpoint written by 2 ranks; give "
                              f"its step folder {self.step}")

    def test_eval_of_a_folder_that_is_no_checkpoint(self):
        empty = tempfile.mkdtemp(dir=self.tmp)
        self.one_error("eval", self.config, f"--checkpoint={empty}",
                       needle=f"{empty}: not a checkpoint")

    def test_eval_of_a_dump_folder_or_latest_reads_its_newest_step(self):
        for checkpoint in (self.trained, "latest"):
            result = run("eval", self.config, f"--checkpoint={checkpoint}",
                         f"--job.dump_folder={self.trained}", "--parallel.tp=2")
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.assertIn("step-000002", result.stderr)

    def test_a_launcher_with_fewer_processes_than_the_mesh(self):
        env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "x"}
        line = self.one_error("train", self.config, "--parallel.tp=4", "--job.dump_folder=out",
                              env=env, needle="needs 4 processes, but torchrun started 2")
        self.assertNotIn("--nproc", line)

    def test_lint_and_train_agree_on_a_batch_sharded_attention_input(self):
        with open(os.path.join(ROOT, "plans", "gpt", "megatron-sp.json")) as f:
            plan = json.load(f)
        plan["forward"]["transformer.h.*.attn.input"] = [["S(0)"]]
        path = os.path.join(self.tmp, "batch-attention.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        args = (self.config, "--parallel.tp=2", f"--parallel.plan={path}")
        lint = run("plan", "lint", *args)
        train = run("train", *args, f"--job.dump_folder={os.path.join(self.tmp, 'batch')}")
        print(f"batch-sharded attention input: lint exit {lint.returncode}, train exit "
              f"{train.returncode}")
        self.assertEqual(lint.returncode, 0, lint.stderr[-2000:])
        self.assertEqual(train.returncode, 0, train.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()

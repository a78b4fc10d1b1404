"""Every plan of the zoo, as `plan list` names it, on a mesh it is written for: `plan lint` and a
training step agree that it works ([16] item 12), and a plan on a mesh of the wrong number of
tp dims is the same error in both."""
import os
import shutil
import tempfile
import unittest

from common import TINY_GPT, run, write_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = TINY_GPT + """
[training]
steps = 1
global_batch_size = 4
seq_len = 16
"""
LLAMA = GPT.replace('name = "gpt"', 'name = "llama"\nn_kv_head = 2\nintermediate_size = 24')
MIXTRAL = LLAMA.replace('name = "llama"', 'name = "mixtral"\nnum_experts = 4\nexperts_per_token = 2')
# A plan's mesh, where it is not tp = 2.
MESH = {"gpt/megatron-tp-2d": ("--parallel.tp=4", "--parallel.tp_shape=[2, 2]")}


class PlanZoo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-zoo-")
        os.makedirs(os.path.join(cls.tmp, "llama"))
        os.makedirs(os.path.join(cls.tmp, "mixtral"))
        cls.configs = {"gpt": write_config(cls.tmp, GPT),
                       "llama": write_config(os.path.join(cls.tmp, "llama"), LLAMA),
                       "mixtral": write_config(os.path.join(cls.tmp, "mixtral"), MIXTRAL),
                       "mlp": os.path.join(ROOT, "configs", "mlp-tp.toml")}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def lint_and_train(self, plan, *mesh):
        config = self.configs[plan.split("/")[0]]
        args = (config, f"--parallel.plan={plan}", "--parallel.dp=1", *mesh, "--training.steps=1",
                "--eval.windows=1")
        lint = run("plan", "lint", *args)
        train = run("train", *args, f"--job.dump_folder={os.path.join(self.tmp, plan)}")
        return lint, train

    def test_lint_and_train_agree_on_every_zoo_plan(self):
        listed = run("plan", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        plans = [l.split()[0] for l in listed.stdout.splitlines() if "/" in l.split()[0]
                 and not l.startswith("(")]
        self.assertIn("gpt/megatron-tp-2d", plans)
        for plan in plans:
            with self.subTest(plan=plan):
                lint, train = self.lint_and_train(plan, *MESH.get(plan, ("--parallel.tp=2",)))
                print(f"{plan}: lint exit {lint.returncode}, train exit {train.returncode}")
                self.assertEqual(lint.returncode, 0, lint.stderr[-2000:])
                self.assertEqual(train.returncode, 0, train.stderr[-2000:])

    def test_a_plan_on_a_mesh_of_other_tp_dims_fails_alike_in_lint_and_train(self):
        for plan, mesh in [("gpt/megatron-tp-2d", ("--parallel.tp=2",)),
                           ("gpt/megatron-tp", ("--parallel.tp=4", "--parallel.tp_shape=[2, 2]"))]:
            lint, train = self.lint_and_train(plan, *mesh)
            line = lint.stderr.strip().splitlines()[-1]
            print(f"{plan} {' '.join(mesh)}: lint exit {lint.returncode}, train exit "
                  f"{train.returncode}: {line}")
            self.assertEqual(lint.returncode, 2)
            self.assertEqual(train.returncode, 2)
            self.assertIn("parallel.tp_shape", line)
            self.assertIn(line.replace("error: ", ""), train.stderr)

    def test_tp_shape_must_multiply_to_tp(self):
        result = run("train", self.configs["gpt"], "--parallel.tp=2", "--parallel.tp_shape=[2, 2]",
                     "--print-config")
        self.assertEqual(result.returncode, 2)
        self.assertIn("parallel.tp_shape = [2, 2] multiplies to 4, but parallel.tp = 2", result.stderr)


if __name__ == "__main__":
    unittest.main()

"""Fine-tuning on the real binary: docs/data.md's walk-through (a Llama exported as Hugging Face
weights, imported with hf:DIR, fine-tuned on scripts/sft_example.py's set rendered by the ChatML
template, exported again, asked a question in the template; the full fine-tune as written gives
the five answers the page shows), and JSON-lines input that data
prepare refuses with exit 2, one line naming file:line, and nothing written."""
import gzip
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from common import metrics_lines, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "configs")
CHATML = os.path.join(CONFIGS, "templates", "chatml.toml")
# configs/llama-tiny.toml's model, smaller, for a test's seconds.
SMALL = ["--model.n_layer=2", "--model.n_embd=64", "--model.intermediate_size=128"]
ANSWER = re.compile(r"^(The opposite of \w+ is \w+|[A-Z][\w ]* is \w+)\.<\|im_end\|>$")


def measured_cpu():
    """Whether this is the CPU docs/data.md's walk-through was measured on (Intel family 6 model
    207, the Xeon of docs/benchmarks.md)."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return False
    return ("GenuineIntel" in info and re.search(r"^cpu family\s*:\s*6$", info, re.M) is not None
            and re.search(r"^model\s*:\s*207$", info, re.M) is not None)


def ok(result, what):
    if result.returncode != 0:
        raise AssertionError(f"{what} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


class FineTuning(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vescale-sft-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def base_and_data(self, steps=10, model=SMALL):
        """The walk-through's steps 1 and 2: a model to start from (`steps` of pretraining of
        `model`), as Hugging Face weights, and the fine-tuning set's tokens and masks."""
        fortunes = self.path("fortunes.txt")
        subprocess.run([os.path.join(ROOT, "scripts", "prepare_fortunes.sh"), fortunes], check=True)
        ok(run("train", os.path.join(CONFIGS, "llama-tiny.toml"), "--parallel.dp=1",
               "--parallel.tp=1", "--parallel.plan=", f"--training.steps={steps}", *model,
               f"--data.path={fortunes}", f"--job.dump_folder={self.path('pre')}",
               f"--checkpoint.interval={steps}", "--eval.interval=0", "--eval.windows=1"),
           "pretraining")
        ok(run("export", self.path("pre/checkpoints/latest"), "-o", self.path("pre-hf"),
               "--format", "hf"), "export")
        subprocess.run(["python3", os.path.join(ROOT, "scripts", "sft_example.py"),
                        self.path("sft.jsonl")], check=True, capture_output=True)
        prepared = ok(run("data", "prepare", self.path("sft.jsonl"), "--sft", "--template", CHATML,
                          "-o", self.path("sft-tokens")), "data prepare")
        self.assertIn("2000 examples", prepared.stdout)

    def answer(self, config, checkpoint, question="What is the opposite of up?"):
        """generate's reply to a question of the walk-through, checked to be in the template;
        returns it."""
        answer = ok(run("generate", *config, "--checkpoint", checkpoint, "--template", CHATML,
                        "--prompt", question, "--greedy", "--max-new-tokens", "80"), "generate")
        print(answer.stdout)
        head = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
        self.assertTrue(answer.stdout.startswith(head), answer.stdout)
        reply = answer.stdout[len(head):].strip()
        self.assertRegex(reply, ANSWER)  # an answer of the set's shape, stopped at its end
        self.assertNotIn("80 new tokens", answer.stderr)
        return reply

    def test_walk_through_imports_tunes_exports_and_answers_in_the_template(self):
        self.base_and_data()
        tune = [os.path.join(CONFIGS, "llama-tiny-sft.toml"), *SMALL,
                f"--data.path={self.path('sft-tokens')}"]
        tuned = ok(run("train", *tune, f"--checkpoint.load=hf:{self.path('pre-hf')}",
                       f"--job.dump_folder={self.path('sft')}", "--training.steps=300",
                       "--training.global_batch_size=8", "--optimizer.lr=3e-3",
                       "--eval.interval=150", "--checkpoint.interval=300",
                       "--metrics.peak_flops=1e12"), "fine-tuning")
        first, last = map(float, re.search(r"val_loss ([\d.]+) -> ([\d.]+)",
                                           tuned.stdout + tuned.stderr).groups())
        evals = [m["val_loss"] for m in metrics_lines(self.path("sft")) if "val_loss" in m]
        print(f"validation loss on the answers' tokens: {first} before, then {evals}")
        self.assertLess(last, first / 5)
        ok(run("export", self.path("sft/checkpoints/latest"), "-o", self.path("sft-hf"),
               "--format", "hf"), "export after fine-tuning")
        self.answer(tune, f"hf:{self.path('sft-hf')}")

    def test_walk_through_with_lora(self):
        """Step 3b as written: LoRA adapters on the frozen weights of llama-tiny's model (trained
        300 steps: a head barely past its initialization leaves the adapters little to steer),
        exported for peft and merged."""
        self.base_and_data(steps=300, model=[])
        tune = [os.path.join(CONFIGS, "llama-tiny-sft-lora.toml"),
                f"--data.path={self.path('sft-tokens')}",
                f"--checkpoint.load=hf:{self.path('pre-hf')}"]
        tuned = ok(run("train", *tune, f"--job.dump_folder={self.path('lora')}",
                       "--metrics.peak_flops=1e12", timeout=600), "LoRA")
        self.assertIn("[lora] a new run on the base at step 0", tuned.stderr)
        first, last = map(float, re.search(r"val_loss ([\d.]+) -> ([\d.]+)",
                                           tuned.stdout + tuned.stderr).groups())
        evals = [m["val_loss"] for m in metrics_lines(self.path("lora")) if "val_loss" in m]
        print(f"LoRA: validation loss on the answers' tokens: {first} before, then {evals}")
        self.assertLess(last, first / 3)
        checkpoint = self.path("lora/checkpoints/latest")
        ok(run("export", checkpoint, "-o", self.path("lora-peft"), "--format", "peft"), "peft")
        self.assertEqual(sorted(os.listdir(self.path("lora-peft"))),
                         ["adapter_config.json", "adapter_model.safetensors"])
        ok(run("export", checkpoint, "-o", self.path("lora-hf"), "--format", "hf",
               "--merge-lora"), "--merge-lora")
        # The LoRA checkpoint (its base and adapters), and the merged weights as a plain model.
        self.answer(tune, checkpoint)
        self.answer([os.path.join(CONFIGS, "llama-tiny-sft.toml"),
                     f"--data.path={self.path('sft-tokens')}"], f"hf:{self.path('lora-hf')}")

        # Step 3 as written on the same base: the full fine-tune and docs/data.md's five answers.
        full = [os.path.join(CONFIGS, "llama-tiny-sft.toml"), f"--data.path={self.path('sft-tokens')}"]
        ok(run("train", *full, f"--checkpoint.load=hf:{self.path('pre-hf')}",
               f"--job.dump_folder={self.path('full')}", "--metrics.peak_flops=1e12", timeout=600),
           "the full fine-tune")
        ok(run("export", self.path("full/checkpoints/latest"), "-o", self.path("full-hf"),
               "--format", "hf"), "export after the full fine-tune")
        documented = {"What is the opposite of up?": "The opposite of up is down.",
                      "What colour is grass?": "Grass is green.",
                      "What is the opposite of wet?": "The opposite of wet is dry.",
                      "What colour is a plum?": "A plum is purple.",
                      "What is the opposite of hot?": "The opposite of hot is cold."}
        replies = {q: self.answer(full, f"hf:{self.path('full-hf')}", q) for q in documented}
        right = [q for q, a in documented.items() if replies[q] == a + "<|im_end|>"]
        print(f"the full fine-tune answered {len(right)} of the documented 5 as docs/data.md shows")
        # 5 of 5 on the CPU docs/data.md was measured on (aef2252 answered "hot" with "The
        # opposite of wet is dry." there); on another CPU float32 rounds in another order, and a
        # greedy reply of a model this small may flip where two tokens' logits are close.
        self.assertGreaterEqual(len(right), 5 if measured_cpu() else 4, replies)

    def test_bad_lines_exit_2_naming_file_and_line_and_write_nothing(self):
        out = self.path("out")
        good = self.path("good.jsonl")
        with open(good, "w") as f:
            f.write('{"text": "the good tokens of an earlier prepare"}\n' * 4)
        ok(run("data", "prepare", good, "-o", out), "a good prepare")
        before = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}
        line = '{"text": "fine"}\n'
        cases = {
            "not-json.jsonl": (line + "{oops\n", ":2: not JSON"),
            "no-field.jsonl": (line + line + '{"txt": "x"}\n', ':3: no field "text"'),
            "not-string.jsonl": ('{"text": ["a"]}\n', ':1: field "text" is an array'),
            "cut.jsonl.gz": (gzip.compress((line * 50).encode())[:30], "truncated compressed"),
        }
        zstd = shutil.which("zstd")
        if zstd:
            whole = subprocess.run([zstd, "-q", "-c"], input=(line * 50).encode(),
                                   capture_output=True, check=True).stdout
            cases["cut.jsonl.zst"] = (whole[:15], "truncated compressed")
        for name, (data, expected) in cases.items():
            path = self.path(name)
            with open(path, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
            result = run("data", "prepare", path, "-o", out)
            self.assertEqual(result.returncode, 2, result.stderr)
            errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
            self.assertEqual(len(errors), 1, result.stderr)
            self.assertIn(name, errors[0])
            self.assertIn(expected, errors[0])
            after = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}
            self.assertEqual(after, before, f"{name}: the folder changed")
            print(f"{name}: exit 2, {errors[0]}")
        # --skip-bad-lines counts them and goes on.
        mixed = self.path("mixed.jsonl")
        with open(mixed, "w") as f:
            f.write(line * 3 + "{oops\n" + line * 3 + '{"text": 1}\n')
        result = ok(run("data", "prepare", mixed, "-o", self.path("skipped"), "--skip-bad-lines",
                        "--val-fraction", "0.3"), "--skip-bad-lines")
        self.assertIn("6 documents", result.stdout)
        self.assertIn("skipped 2 bad lines (the first: ", result.stdout)
        self.assertIn("mixed.jsonl:4: not JSON", result.stdout)


if __name__ == "__main__":
    unittest.main()

"""`vescale-train generate` on real processes: a character-level GPT trained a few steps on a
small English text writes the same seeded sample from its sharded, deduped and merged checkpoints on 1
process, tp2 and pp2 x tp2; token-id models take --prompt-ids; the KV cache gives the same text as
--no-cache; the summary line is on standard error; bad prompts fail with one line."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from common import BINARY, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "configs", "gpt-tiny.toml")
SYNTHETIC = os.path.join(ROOT, "configs", "gpt-dp2-tp2.toml")
ONE = ("--parallel.dp=1", "--parallel.tp=1", "--parallel.pp=1")
SAMPLE = ("--prompt", "The ", "--max-new-tokens", "80", "--temperature", "0.8", "--seed", "3")
TEXT = ("The quick brown fox jumps over the lazy dog. A fortune is a short saying; the wise man "
        "reads it twice and the fool not at all.\n") * 60


class Generate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-generate-")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:
            f.write(TEXT)
        cls.data = f"--data.path={cls.text}"
        cls.folders = {}
        for fmt in ("sharded", "merged"):
            folder = os.path.join(cls.tmp, fmt)
            result = run("train", TINY, f"--job.dump_folder={folder}", cls.data, "--training.steps=20",
                         "--checkpoint.interval=20", f"--checkpoint.format={fmt}",
                         "--eval.interval=0", timeout=600)
            assert result.returncode == 0, result.stderr[-3000:]
            cls.folders[fmt] = folder

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def generate(self, config, checkpoint, *args):
        """The run, its standard output as bytes (a model may write any byte)."""
        data = (self.data,) if config == TINY else ()
        result = subprocess.run([BINARY, "generate", config, "--checkpoint", checkpoint, *data, *args],
                                capture_output=True, timeout=300)
        stderr = result.stderr.decode(errors="replace")
        self.assertEqual(result.returncode, 0, stderr[-3000:])
        result.stderr = stderr
        return result

    def test_the_same_text_on_every_layout_and_format(self):
        latest = os.path.join(self.folders["sharded"], "checkpoints", "latest")
        reference = self.generate(TINY, latest, *SAMPLE, *ONE)
        self.assertTrue(reference.stdout.startswith(b"The "), reference.stdout)
        self.assertEqual(len(reference.stdout), 4 + 80 + 1)
        summary = [l for l in reference.stderr.splitlines() if "[generate]" in l]
        self.assertTrue(summary, reference.stderr)
        self.assertRegex(summary[-1], r"4 prompt tokens, 80 new tokens .* tokens/s after the first; "
                                      r"time to first token")
        print(f"\nsample after 20 steps: {reference.stdout!r}\n{summary[-1]}")
        layouts = {
            "tp2": ("--parallel.dp=1", "--parallel.tp=2", "--parallel.pp=1"),
            "pp2 x tp2": ("--parallel.dp=1", "--parallel.tp=2", "--parallel.pp=2",
                          "--parallel.microbatches=2"),
            "no cache": ONE + ("--no-cache",),
        }
        for name, layout in layouts.items():
            self.assertEqual(self.generate(TINY, latest, *SAMPLE, *layout).stdout,
                             reference.stdout, name)
        merged = os.path.join(self.folders["merged"], "checkpoints", "latest")
        self.assertEqual(self.generate(TINY, merged, *SAMPLE, *ONE).stdout, reference.stdout,
                         "merged")

    def test_several_samples_and_token_ids(self):
        latest = os.path.join(self.folders["sharded"], "checkpoints", "latest")
        out = self.generate(TINY, latest, *SAMPLE, "--num-samples", "3", *ONE).stdout
        self.assertEqual(len(re.findall(rb"-+ sample \d -+", out)), 3, out)
        # A synthetic-data model reads and prints token ids.
        folder = os.path.join(self.tmp, "ids")
        result = run("train", SYNTHETIC, f"--job.dump_folder={folder}", "--training.steps=2",
                     "--checkpoint.interval=2", "--eval.interval=0")
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        ids = self.generate(SYNTHETIC, os.path.join(folder, "checkpoints", "latest"),
                            "--prompt-ids", "1,2,3", "--max-new-tokens", "5", "--greedy").stdout
        self.assertRegex(ids.decode().strip(), r"^1 2 3( \d+){5}$")

    def test_bad_prompts_fail_with_one_line(self):
        latest = os.path.join(self.folders["sharded"], "checkpoints", "latest")
        for args, needle in [
            (("--prompt-ids", "1,x"), "'x' is not a token id in [0, 256)"),
            (("--prompt", "a", "--prompt-ids", "1"), "give one of --prompt, --prompt-file"),
            (("--prompt", "x" * 65), "the prompt has 65 tokens; it must have 1 to "
                                     "model.block_size = 64"),
        ]:
            result = run("generate", TINY, "--checkpoint", latest, self.data, *args, *ONE)
            self.assertNotEqual(result.returncode, 0, args)
            errors = [l for l in result.stderr.splitlines() if "error" in l]
            self.assertTrue(any(needle in l for l in errors), result.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()

"""[36]: what the hostile-user probe of 2026-11-27 found in the tokenizer and data commands, each
a one-line error and exit 2 with nothing written, or the right behaviour: `tokenizer train` died
of SIGSEGV at SentencePiece's first log line (a long line, a vocabulary the text cannot fill,
whitespace-only text, repeated or reserved specials, binary input), and `tokenizer train` and
`plan auto` wrote over their own inputs; `data prepare` left new token files beside an old
meta.json (read at the wrong width) and its partial files after a refusal; data.tokenizer was
never checked; a resume under another global batch was taken; comm bench started workers for
messages that could not fit; and a dozen flags took values they should not."""
import json
import os
import random
import shutil
import unittest

from common import TINY_GPT_TWO_STEPS, write_config
from probe import ProbeCase

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def sentences(rng, count, words=10):
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(count))


class ReliabilityFive(ProbeCase):
    def test_tokenizer_train_speaks_instead_of_crashing(self):
        rng = random.Random(1)
        text = sentences(rng, 200) + "\n"
        long_line = " ".join(rng.choice(WORDS) for _ in range(900))  # ~5,000 bytes
        folder = self.folder_with({
            "text.txt": text,
            "paragraph.txt": text + long_line + "\n",
            "huge_line.txt": " ".join(rng.choice(WORDS) for _ in range(4000)) + "\n",
            "blank.txt": "   \n  \n\t\n",
            "binary.dat": bytes(rng.randrange(256) for _ in range(3000)) + b"\0",
            "latin1.txt": "caf\xe9\n".encode("latin-1"),
        })
        # A line over SentencePiece's 4,192 bytes trains (it was SIGSEGV), bpe and unigram.
        for kind in ("bpe", "unigram"):
            result = self.run_in(folder, "tokenizer", "train", "paragraph.txt", "-o",
                                 f"{kind}.model", "--vocab-size", "280", "--type", kind)
            print(f"tokenizer train --type {kind} with a 5,000-byte line: exit "
                  f"{result.returncode}: {result.stdout.strip()[:60]}")
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.assertNotIn("LOG(", result.stderr)
            os.remove(os.path.join(folder, f"{kind}.model"))
        self.one_error(folder, "tokenizer", "train", "huge_line.txt", "-o", "m.model",
                       "--vocab-size", "300", needle="holds no line to train on: 1 of its 1 lines")
        self.one_error(folder, "tokenizer", "train", "text.txt", "-o", "m.model",
                       "--vocab-size", "5000", needle="--vocab-size 5000 is more pieces than")
        self.one_error(folder, "tokenizer", "train", "blank.txt", "-o", "m.model",
                       "--vocab-size", "300", needle="--vocab-size 300 is more pieces than")
        self.one_error(folder, "tokenizer", "train", "text.txt", "-o", "m.model",
                       "--vocab-size", "300", "--special", "X", "--special", "X",
                       needle="--special 'X' is given twice")
        self.one_error(folder, "tokenizer", "train", "text.txt", "-o", "m.model",
                       "--vocab-size", "300", "--special", "<unk>",
                       needle="--special '<unk>' is one of the model's own pieces")
        self.one_error(folder, "tokenizer", "train", "binary.dat", "-o", "m.model",
                       "--vocab-size", "300", needle="binary.dat")
        self.one_error(folder, "tokenizer", "train", "latin1.txt", "-o", "m.model",
                       "--vocab-size", "300", needle="is not UTF-8: byte 0xe9 at offset 3")

    def test_no_command_writes_over_its_input(self):
        rng = random.Random(2)
        folder = self.folder_with({"corpus.txt": sentences(rng, 200) + "\n"})
        os.makedirs(os.path.join(folder, "sub"))
        os.symlink("corpus.txt", os.path.join(folder, "link.txt"))
        os.link(os.path.join(folder, "corpus.txt"), os.path.join(folder, "hard.txt"))
        train = ["tokenizer", "train", "corpus.txt", "--vocab-size", "300", "--overwrite", "-o"]
        for same in ("corpus.txt", "./corpus.txt", "sub/../corpus.txt", "link.txt", "hard.txt",
                     os.path.join(folder, "corpus.txt")):
            self.one_error(folder, *train, same, needle="is the input corpus.txt")
        # An existing model is replaced only with --overwrite.
        result = self.run_in(folder, *train, "first.model")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.one_error(folder, *train[:-2], "-o", "first.model",
                       needle="-o first.model exists; pass --overwrite")
        result = self.run_in(folder, *train, "first.model")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        # plan auto -o its own config: the hand-written file (comments, plan name) would go.
        config = write_config(self.folder_with({}), TINY_GPT_TWO_STEPS + "# mine\n")
        self.one_error(os.path.dirname(config), "plan", "auto", config, "--nproc", "2", "-o",
                       "job.toml", needle="is the input")

    def test_data_prepare_replaces_its_files_whole(self):
        rng = random.Random(3)
        folder = self.folder_with({"a.txt": sentences(rng, 300) + "\n", "tiny.txt": "ab"})
        result = self.run_in(folder, "data", "prepare", "a.txt", "-o", "data")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        data = os.path.join(folder, "data")
        config = write_config(self.folder_with({}), TINY_GPT_TWO_STEPS)
        train = ["train", config, "--data.source=tokens", f"--data.path={data}",
                 "--model.vocab_size=256", "--checkpoint.interval=0",
                 f"--job.dump_folder={os.path.join(folder, 'run')}"]
        result = self.run_in(folder, *train)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        shutil.rmtree(os.path.join(folder, "run"))
        # A refusal leaves no partial file behind (train.bin.partial stayed before).
        self.one_error(folder, "data", "prepare", "tiny.txt", "-o", "data",
                       needle="are too few to split")
        # An output that is an input is refused before anything is written.
        self.one_error(folder, "data", "prepare", "data/train.bin", "-o", "data",
                       needle="is the input data/train.bin")
        # A prepare stopped between its renames (its meta.json.partial still there), and .bin
        # files of another run's width (uint32 beside a uint16 meta.json): train refuses both.
        bin_path = os.path.join(data, "train.bin")
        with open(bin_path, "rb") as f:
            uint16 = f.read()
        with open(bin_path, "wb") as f:
            f.write(b"".join(uint16[i:i + 2] + b"\0\0" for i in range(0, len(uint16), 2)))
        self.one_error(folder, *train, needle="but meta.json says")
        with open(os.path.join(data, "meta.json.partial"), "w") as f:
            f.write("{}")
        self.one_error(folder, *train, needle="a data prepare stopped while it replaced")

    def test_the_data_tokenizer_is_checked_before_the_first_step(self):
        rng = random.Random(4)
        folder = self.folder_with({"a.txt": sentences(rng, 300) + "\n"})
        for args in (["a.txt", "-o", "bytes-data"],):
            result = self.run_in(folder, "data", "prepare", *args)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        result = self.run_in(folder, "tokenizer", "train", "a.txt", "-o", "sp.model",
                             "--vocab-size", "300")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        config = write_config(self.folder_with({}), TINY_GPT_TWO_STEPS)
        tokens = [config, "--data.source=tokens", f"--data.path={os.path.join(folder, 'bytes-data')}",
                  "--model.vocab_size=300", "--checkpoint.interval=2",
                  f"--job.dump_folder={os.path.join(folder, 'run')}"]
        for command in (["train"], ["plan", "lint"]):
            self.one_error(folder, *command, *tokens, "--data.tokenizer=missing.model",
                           needle='data.tokenizer = "missing.model": tokenizer missing.model: '
                                  'no such file')
            self.one_error(folder, *command, *tokens, "--data.tokenizer=sp.model",
                           needle="says its tokens were made by bytes")
        self.one_error(folder, "train", config, "--data.source=text",
                       f"--data.path={os.path.join(folder, 'a.txt')}", "--model.vocab_size=256",
                       "--data.tokenizer=sp.model", needle='with data.source = "text"')
        # A tokenizer with more ids than the model; one with fewer generates within its own.
        self.one_error(folder, "train", config, "--data.tokenizer=sp.model",
                       needle="has 300 tokens, more than the model's vocabulary of 32")
        result = self.run_in(folder, "train", *tokens, "--data.tokenizer=bytes")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        # The model's 300 ids, the tokenizer's 256: sampling once picked ids bytes cannot decode.
        for seed in range(3):
            result = self.run_in(folder, "generate", *tokens, "--data.tokenizer=bytes",
                                 "--checkpoint", "latest", "--prompt", "ab", "--seed", str(seed),
                                 "--max-new-tokens=12")
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            self.assertTrue(result.stdout.startswith("ab"), result.stdout)
        # Resuming under another global batch changes the data order: refused, as a seed is.
        self.one_error(folder, "train", *tokens, "--data.tokenizer=bytes", "--training.steps=4",
                       "--checkpoint.load=latest", "--training.global_batch_size=8",
                       needle="training.global_batch_size = 8 in this job's config, but the "
                              "checkpoint's run was trained with training.global_batch_size = 4")

    def test_flags_and_sizes_refused_before_anything_starts(self):
        folder = self.folder_with({"a.txt": "hello world\n" * 50, "file": "x"})
        os.mkfifo(os.path.join(folder, "fifo"))
        config = write_config(self.folder_with({}), TINY_GPT_TWO_STEPS)
        cases = [
            (["data", "prepare", "a.txt", "-o", "out", "--threads", "0"], "'0' is not a whole "
             "number in [1, 1024]"),
            (["data", "prepare", "a.txt", "-o", "out", "--threads", "100000"], "[1, 1024]"),
            (["data", "prepare", "a.txt", "-o", "file"], "a file, not a folder"),
            (["tokenizer", "train", "a.txt", "-o", "m.model", "--threads", "-3"], "[1, 1024]"),
            (["tokenizer", "train", "a.txt", "-o", "m.model", "--vocab-size", "4294967297"],
             "--vocab-size 4294967297 must be in [260, 2^31 - 1]"),
            (["tokenizer", "encode", "--tokenizer", "fifo", "--text", "x"], "a FIFO"),
            (["train", config, "--nproc", "0"], "'0' is not a whole number in [1, 65536]"),
            (["train", config, "--max-restarts", "-1"], "'-1' is not a whole number in [0, "),
            (["train", config, "--min-ranks", "0"], "'0' is not a whole number in [1, 65536]"),
            (["train", config, "--min-ranks", "2"], "add --elastic"),
            (["train", config, "--parallel.dp=Auto"], 'must be an integer or "auto"'),
            (["comm", "bench", "--timeout", "0"], "'0' is not a finite number in [0.001, 86400]"),
            (["comm", "bench", "--nproc", "2", "--sizes", "100G"],
             "comm bench --sizes 100G: 2 ranks each holding about"),
            (["comm", "bench", "--mesh", "dp=2048,tp=2"], "needs 4096 local worker processes"),
        ]
        for args, needle in cases:
            self.one_error(folder, *args, needle=needle)

    def test_a_mixtral_config_json_read_as_transformers_would(self):
        folder = self.folder_with({})
        mixtral = os.path.join(ROOT, "configs", "mixtral-tiny.toml")
        run_args = ["--training.steps=1", "--checkpoint.interval=1", "--parallel.dp=1",
                    "--parallel.ep=1", "--data.source=synthetic",
                    f"--job.dump_folder={os.path.join(folder, 'run')}"]
        result = self.run_in(folder, "train", mixtral, *run_args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        hf = os.path.join(folder, "hf")
        result = self.run_in(folder, "export", os.path.join(folder, "run", "checkpoints",
                                                            "step-000001"), "-o", hf)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        path = os.path.join(hf, "config.json")
        with open(path) as f:
            good = json.load(f)
        self.assertNotEqual(good["num_local_experts"], 8)  # the test needs another count
        eval_args = ["eval", mixtral, "--parallel.dp=1", "--parallel.ep=1",
                     "--data.source=synthetic", "--checkpoint", f"hf:{hf}"]
        for change, needle in (
                (lambda c: c.pop("num_local_experts"),
                 "num_local_experts = 8 (Hugging Face's default: the file does not set it)"),
                (lambda c: c.update(num_local_experts=-4),
                 "num_local_experts = -4 is not a positive count of a model")):
            config = dict(good)
            change(config)
            with open(path, "w") as f:
                json.dump(config, f)
            line = self.one_error(folder, *eval_args, needle=needle)
            self.assertNotIn("= -4)", line)  # no advice to set the key to -4


if __name__ == "__main__":
    unittest.main()

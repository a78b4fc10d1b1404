"""[43]: what the hostile-user probe of 2026-12-01 found, each a one-line error and exit 2 with
every existing file as it was, or the right behaviour: three commands replaced files they did not
write (-o), fine-tuning data whose windows train nothing ran with loss 0, compressed input was
told by its name (bzip2 and xz tokenized as text, pzstd's and zstd --long's files refused), a
question asked in another chat template than the data's, plan auto proposing layouts for a
device the machine has not, a Mixtral import of a scaled rotary embedding or another model's
class, two prepares into one folder at once, and a dozen smaller wrongs and unclear words."""
import bz2
import gzip
import json
import lzma
import os
import random
import re
import shutil
import signal
import subprocess
import time
import unittest

from common import BINARY, TINY_GPT_TWO_STEPS, write_config
from live_run import EXACT, LiveRun, latest_step
from probe import ProbeCase, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHATML = os.path.join(ROOT, "configs", "templates", "chatml.toml")
LLAMA3 = os.path.join(ROOT, "configs", "templates", "llama3.toml")
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]

# A GPT on byte tokens (data prepare's default tokenizer), fine-tuned on a tokens folder.
SFT_GPT = """
[model]
name = "gpt"
vocab_size = 256
block_size = 64
n_layer = 1
n_head = 2
n_embd = 16
[data]
source = "tokens"
path = "tokens"
tokenizer = "bytes"
[training]
steps = 2
global_batch_size = 4
seq_len = 64
[eval]
interval = 0
windows = 2
"""


def byte_level_tokenizer(added):
    """A tokenizer.json of GPT-2's 256 byte characters (ids 0-255), no merges, and `added`."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
                 + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return json.dumps({"model": {"type": "BPE", "vocab": {chars[b]: b for b in range(256)},
                                 "merges": []},
                       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                       "decoder": {"type": "ByteLevel"}, "added_tokens": added})


def sentences(rng, count, words=8):
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(count))


def examples(rng, count, prompt_words):
    """JSON lines of {"prompt", "response"} with prompts of `prompt_words` words."""
    return "".join(json.dumps({"prompt": " ".join(rng.choice(WORDS) for _ in range(prompt_words)),
                               "response": rng.choice(WORDS)}) + "\n" for _ in range(count))


class ReliabilitySix(ProbeCase):
    def test_outputs_this_tool_did_not_write_need_overwrite(self):
        rng = random.Random(1)
        folder = self.folder_with({
            "corpus.txt": sentences(rng, 300) + "\n",
            "mine.toml": "# my hand-written config\n",
            "notes.txt": "my notes\n",
            # A nanoGPT folder: its train.bin and val.bin, no meta.json of ours.
            "nano/train.bin": bytes(rng.randrange(256) for _ in range(4000)),
            "nano/val.bin": bytes(rng.randrange(256) for _ in range(400)),
            "nano/meta.pkl": b"\x80\x04K\x00.",
        })
        config = write_config(folder, TINY_GPT_TWO_STEPS)
        self.one_error(folder, "plan", "auto", config, "--nproc", "2", "-o", "mine.toml",
                       needle="mine.toml: the file exists and is not a config plan auto wrote")
        self.one_error(folder, "comm", "bench", "--calibrate", "notes.txt",
                       needle="notes.txt: the file exists and is not machine facts")
        self.one_error(folder, "data", "prepare", "corpus.txt", "-o", "nano",
                       needle="nano/train.bin: the file exists and is not a token file")
        # --overwrite replaces them; a folder our prepare wrote is replaced without it.
        self.ok(folder, "data", "prepare", "corpus.txt", "-o", "nano", "--overwrite")
        with open(os.path.join(folder, "nano", "meta.json")) as f:
            self.assertEqual(json.load(f)["tokenizer"], "bytes")
        self.ok(folder, "data", "prepare", "corpus.txt", "-o", "nano")

    def test_windows_that_train_nothing_are_refused_and_a_partial_loss_is_told(self):
        rng = random.Random(2)
        # Prompts of ~60 words (~350 bytes) with seq_len 64: every answer is cut away unpacked.
        mixed = (examples(rng, 30, 60) + examples(rng, 60, 2)).splitlines(keepends=True)
        rng.shuffle(mixed)
        folder = self.folder_with({"long.jsonl": examples(rng, 40, 60),
                                   "mixed.jsonl": "".join(mixed)})
        self.ok(folder, "data", "prepare", "long.jsonl", "--sft", "--template", CHATML,
                "-o", "tokens", "--val-fraction", "0.2")
        config = write_config(folder, SFT_GPT)
        unpacked = "--data.sft_pack=false"
        for command in (["plan", "lint"], ["train"]):
            self.one_error(folder, *command, config, unpacked, "--job.dump_folder=run",
                           needle="the train split's windows hold no trained target")
        # Packed, the same data trains (every target falls in some window).
        trained = self.ok(folder, "train", config, "--job.dump_folder=run")
        self.assertIn("step 2/2", trained.stderr)
        shutil.rmtree(os.path.join(folder, "run"))
        # Some examples fit: the share lost is told, and the run trains.
        self.ok(folder, "data", "prepare", "mixed.jsonl", "--sft", "--template", CHATML,
                "-o", "tokens", "--val-fraction", "0.2")
        linted = self.ok(folder, "plan", "lint", config, unpacked)
        self.assertRegex(linted.stdout + linted.stderr,
                         r"\d+\.\d% of the train split's trained targets \(\d+ of \d+\) lie past")

    def test_compressed_input_is_told_by_its_bytes(self):
        rng = random.Random(3)
        lines = "".join(json.dumps({"text": sentences(rng, 1)}) + "\n" for _ in range(200))
        raw = lines.encode()
        zstd = subprocess.run(["zstd", "-q", "-c"], input=raw, capture_output=True,
                              check=True).stdout
        # pzstd's files start with a skippable frame; zstd --long=31 from a pipe keeps its window.
        skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"\0\0\0\0" + zstd
        long = subprocess.run(["zstd", "-q", "-c", "--long=31"], input=raw, capture_output=True,
                              check=True).stdout
        folder = self.folder_with({
            "plain.jsonl": raw, "upper.JSONL": raw, "gzip-named.txt.jsonl": gzip.compress(raw),
            "pzstd.jsonl.zst": skippable, "long.jsonl.zst": long,
            "bzip.jsonl.bz2": bz2.compress(raw), "xz.jsonl.xz": lzma.compress(raw),
            "zstd-named.jsonl.gz": zstd, "plain-named.jsonl.gz": raw,
        })
        reference = None
        for name in ("plain.jsonl", "upper.JSONL", "gzip-named.txt.jsonl", "pzstd.jsonl.zst",
                     "long.jsonl.zst"):
            out = os.path.join(folder, "out-" + name)
            self.ok(folder, "data", "prepare", name, "-o", out)
            with open(os.path.join(out, "train.bin"), "rb") as f:
                tokens = f.read()
            reference = reference or tokens
            self.assertEqual(tokens, reference, name)  # the same documents, whatever the wrapping
        self.one_error(folder, "data", "prepare", "bzip.jsonl.bz2", "-o", "x",
                       needle="holds bzip2-compressed bytes (its first bytes), which data "
                              "prepare does not read: decompress it first (bunzip2 -k")
        self.one_error(folder, "data", "prepare", "xz.jsonl.xz", "-o", "x",
                       needle="holds xz-compressed bytes")
        self.one_error(folder, "data", "prepare", "zstd-named.jsonl.gz", "-o", "x",
                       needle="name ends in .gz but it holds zstd (its first bytes)")
        self.one_error(folder, "data", "prepare", "plain-named.jsonl.gz", "-o", "x",
                       needle="name ends in .gz but it holds no compressed data")

    def test_a_question_in_another_template_than_the_datas_is_refused(self):
        rng = random.Random(4)
        folder = self.folder_with({"sft.jsonl": examples(rng, 60, 3)})
        self.ok(folder, "data", "prepare", "sft.jsonl", "--sft", "--template", CHATML,
                "-o", "tokens", "--val-fraction", "0.2")
        config = write_config(folder, SFT_GPT + "[checkpoint]\ninterval = 2\n")
        self.ok(folder, "train", config, "--job.dump_folder=run")
        ask = ["generate", config, "--checkpoint", "run/checkpoints/latest", "--prompt", "alpha",
               "--max-new-tokens", "4"]
        self.one_error(folder, *ask, "--template", LLAMA3,
                       needle="its assistant.after is \"<|eot_id|>\", but the data in tokens was "
                              "rendered with \"<|im_end|>\\n\"")
        self.ok(folder, *ask, "--template", CHATML)
        # A question longer than the model's context is refused before anything is printed.
        result = self.run_in(folder, *ask[:-4], "--prompt", "alpha " * 40, "--max-new-tokens",
                             "4", "--template", CHATML)
        self.assertEqual(result.returncode, 2, result.stderr[-3000:])
        self.assertIn("it must have 1 to model.block_size = 64", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_plan_auto_checks_the_device_first(self):
        folder = self.folder_with({})
        config = write_config(folder, TINY_GPT_TWO_STEPS)
        self.one_error(folder, "plan", "auto", config, "--nproc", "2", "--training.device=cuda",
                       needle="training.device = 'cuda', but no GPU is visible")

    def test_a_hugging_face_config_of_another_model_is_refused_for_every_family(self):
        folder = self.folder_with({})
        mixtral = os.path.join(ROOT, "configs", "mixtral-tiny.toml")
        small = ["--model.n_layer=1", "--data.source=synthetic", "--training.steps=1",
                 "--checkpoint.interval=1", "--eval.interval=0", "--eval.windows=1",
                 "--parallel.dp=1", "--parallel.ep=1", "--parallel.plan=",
                 "--job.dump_folder=run"]
        self.ok(folder, "train", mixtral, *small)
        self.ok(folder, "export", "run/checkpoints/latest", "-o", "hf", "--format", "hf")
        with open(os.path.join(folder, "hf", "config.json")) as f:
            good = json.load(f)
        cases = [({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling = "),
                 ({"rope_parameters": {"rope_type": "yarn", "rope_theta": good.get(
                     "rope_theta", 1e6), "factor": 2.0}}, "rope_scaling = "),
                 ({"architectures": ["LlamaForCausalLM"]}, "architectures = [\"LlamaForCausalLM\"]")]
        for change, needle in cases:
            with open(os.path.join(folder, "hf", "config.json"), "w") as f:
                json.dump({**good, **change}, f)
            self.one_error(folder, "eval", mixtral, *small, "--checkpoint", "hf:hf",
                           needle=needle)

    def test_two_prepares_into_one_folder_do_not_both_report_success(self):
        rng = random.Random(5)
        folder = self.folder_with({"a.txt": (sentences(rng, 3000) + "\n") * 200})  # ~27 MB
        first = subprocess.Popen([BINARY, "data", "prepare", "a.txt", "-o", "out"], cwd=folder,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lock = os.path.join(folder, "out", ".prepare.lock")
        try:
            # Held once the lock names its pid: stopped there, the second prepare meets it.
            deadline = time.time() + 60
            while time.time() < deadline:
                if os.path.exists(lock) and open(lock).read().strip().endswith(str(first.pid)):
                    break
                time.sleep(0.01)
            first.send_signal(signal.SIGSTOP)
            second = self.run_in(folder, "data", "prepare", "a.txt", "-o", "out")
            self.assertEqual(second.returncode, 2, second.stderr)
            self.assertIn("is locked by another data prepare", second.stderr)
        finally:
            first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=120)
        self.assertEqual(first.returncode, 0, err)
        self.assertIn("wrote out", out)

    def test_smaller_wrongs_are_refused(self):
        rng = random.Random(6)
        both = json.dumps({"prompt": "a", "response": "b",
                           "messages": [{"role": "user", "content": "a"}]}) + "\n"
        folder = self.folder_with({"both.jsonl": both, "text.txt": sentences(rng, 50) + "\n",
                                   "sft.jsonl": examples(rng, 20, 3)})
        self.one_error(folder, "data", "prepare", "both.jsonl", "--sft", "--template", CHATML,
                       "-o", "x", needle="an example has \"messages\" and \"prompt\"")
        self.one_error(folder, "data", "prepare", "sft.jsonl", "--sft", "--template", CHATML,
                       "--field", "body", "-o", "x", needle="--sft reads each example's")
        self.one_error(folder, "data", "prepare", "text.txt", "--field", "body", "-o", "x",
                       needle="no input is read as JSON lines")
        config = write_config(folder, TINY_GPT_TWO_STEPS)
        for key in ("--optimizer.ns_steps=7", "--optimizer.muon_scale=shape",
                    "--optimizer.momentum=0.5"):
            self.one_error(folder, "plan", "lint", config, key,
                           needle=f"{key[2:key.index('=')]} is a key of optimizer.name")
        self.ok(folder, "plan", "lint", config, "--optimizer.name=muon", "--optimizer.ns_steps=7")

    def test_unclear_cases_speak_in_one_line(self):
        rng = random.Random(7)
        bad_line = examples(rng, 20, 3) + "{not json\n"
        folder = self.folder_with({
            "bad.jsonl": bad_line, "text.txt": sentences(rng, 50) + "\n",
            "top.toml": "before = \"x\"\n[user]\nbefore = \"u\"\n",
        })
        # A refused prepare leaves no -o folder behind, nor its parents.
        self.one_error(folder, "data", "prepare", "bad.jsonl", "--sft", "--template", CHATML,
                       "-o", "new/deeper/out", needle="bad.jsonl:21")
        self.one_error(folder, "data", "prepare", "text.txt", "--tokenizer", "", "-o", "x",
                       needle="--tokenizer is empty")
        self.one_error(folder, "data", "prepare", "bad.jsonl", "--sft", "--template", "top.toml",
                       "-o", "x", needle="before is a key outside any table")
        self.one_error(folder, "comm", "bench", "--device", "cuda",
                       needle="comm bench --device cuda: no GPU is visible")
        before = time.time()
        self.one_error(folder, "comm", "bench", "--ops", "all_reduce,bogus",
                       needle="unknown collective 'bogus' in --ops")
        self.assertLess(time.time() - before, 5)  # no worker started
        config = write_config(folder, TINY_GPT_TWO_STEPS)
        self.one_error(folder, "plan", "lint", config, "--training.steps=99999999999999999999",
                       needle="a whole number written in digits from -9223372036854775808 to "
                              "9223372036854775807")
        self.one_error(folder, "plan", "lint", config, "--job.dump_folder=" + "x" * 300,
                       needle="job.dump_folder has a name of 300 bytes")
        self.one_error(folder, "tokenizer", "decode", "--tokenizer", "bytes",
                       "99999999999999999999",
                       needle="'99999999999999999999' is not a token id of this tokenizer")
        # Progress while one long JSON line encodes says what was read (it said "0B read").
        with open(os.path.join(folder, "long.jsonl"), "w") as f:
            f.write(json.dumps({"text": "ab" * 30_000_000}) + "\n")  # 60 MB: ~3 s here
        began = time.time()
        long = self.ok(folder, "data", "prepare", "long.jsonl", "-o", "long")
        progress = re.findall(r"\[prepare\] (\S+) of text read", long.stderr)
        print(f"a 60 MB line: {time.time() - began:.1f} s, progress {progress}")
        if time.time() - began > 2.5:  # a progress line is due every 2 s
            self.assertTrue(progress, long.stderr[-2000:])
        self.assertNotIn("0B", progress)
        shutil.rmtree(os.path.join(folder, "long"))
        os.remove(os.path.join(folder, "long.jsonl"))
        # A resume under other optimizer.adamw_params names the key, not a model-only file.
        muon = ["--optimizer.name=muon", "--job.dump_folder=muon"]
        self.ok(folder, "train", config, *muon)
        self.one_error(folder, "train", config, *muon, "--checkpoint.load=latest",
                       "--training.steps=4",
                       '--optimizer.adamw_params=["embedding", "norm", "bias", "router"]',
                       needle="optimizer.adamw_params = ['embedding', 'norm', 'bias', "
                              "'router'] in this job's config, but the checkpoint's run")
        shutil.rmtree(os.path.join(folder, "muon"))
        # A tokenizer.json key of the wrong type is named; a token's bytes are shown escaped.
        with open(os.path.join(folder, "typed.json"), "w") as f:
            f.write(byte_level_tokenizer([{"id": 256, "content": 5}]))
        with open(os.path.join(folder, "taken.json"), "w") as f:
            f.write(byte_level_tokenizer([{"id": 10, "content": "\u0001x"}]))
        self.one_error(folder, "tokenizer", "encode", "--tokenizer", "typed.json", "--text", "a",
                       needle="added_tokens[0].content is 5, not a string")
        self.one_error(folder, "tokenizer", "encode", "--tokenizer", "taken.json", "--text", "a",
                       needle='added token "\\u0001x" takes id 10')

    def test_sigterm_during_prepare_leaves_no_partial_files_and_sighup_saves_a_run(self):
        rng = random.Random(8)
        folder = self.folder_with({"a.txt": (sentences(rng, 3000) + "\n") * 200})  # ~27 MB
        os.makedirs(os.path.join(folder, "out"))
        prepare = subprocess.Popen([BINARY, "data", "prepare", "a.txt", "-o", "out"],
                                   cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        partial = os.path.join(folder, "out", "train.bin.partial")
        deadline = time.time() + 60
        while not os.path.exists(partial) and time.time() < deadline:
            time.sleep(0.005)
        prepare.send_signal(signal.SIGSTOP)
        prepare.send_signal(signal.SIGTERM)
        prepare.send_signal(signal.SIGCONT)
        prepare.communicate(timeout=60)
        self.assertEqual(prepare.returncode, -signal.SIGTERM)
        self.assertEqual([n for n in os.listdir(os.path.join(folder, "out"))
                          if n.endswith(".partial")], [])
        # SIGHUP (a closed terminal: the launcher and its workers all get it) saves the last
        # step and stops with 4, as SIGTERM does; it used to end the run unsaved.
        job = LiveRun(os.path.join(folder, "run"), *EXACT, "--training.steps=100000",
                      "--checkpoint.interval=1000")
        job.wait_for(lambda r: r.last_step() >= 3 and len(r.pids) == 4)
        job.proc.send_signal(signal.SIGHUP)
        for pid in job.pids.values():
            os.kill(pid, signal.SIGHUP)
        code = job.wait(timeout=120)
        self.assertEqual(code, 4, job.log()[-3000:])
        self.assertGreaterEqual(latest_step(os.path.join(folder, "run")), 3)

if __name__ == "__main__":
    unittest.main()

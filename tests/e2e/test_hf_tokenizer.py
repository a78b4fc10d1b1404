"""Hugging Face tokenizer.json, byte-level BPE (NOTE [Byte-level BPE]): `tokenizer encode` gives,
token for token, the ids of an independent Python implementation written from the format's
specification (bytelevel_bpe_reference.py, on Python's `regex` module) for a GPT-2 style and a
Llama 3 style file, on the fortunes corpus and on a hostile text; decode(encode(x)) == x for any
bytes; `data prepare` streams a file of several chunks to the same tokens; a model trained on them
is prompted with text and answers in text; any other kind of tokenizer.json is one line, exit 2."""
import json
import os
import shutil
import subprocess
import unittest

from common import (BINARY, SYSTEM_PYTHON, first_difference, run, token_stream,
                    tokenizer_texts)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(HERE, "bytelevel_bpe_reference.py")

# Every byte value, bytes that are not UTF-8, long runs of whitespace, emoji, CJK, the added
# tokens, contractions in both cases (and 'ſ, which (?i:'s) takes), digits, Unicode spaces.
HOSTILE = (bytes(range(256)) + b"\xff\xfe\xc3(\xa0\xa1 \xe2\x82 \xf0\x28\x8c\xbc" + b" " * 300 +
           b"\t\t\n\n\n\r\n" + "😀👩‍👩‍👧‍👦 🇯🇵 中文分词测试 日本語のテキスト 한국어 "
           "café naïve ﬁ Ω".encode() + b"\n" * 50 + b"end" +
           "<|endoftext|> it's IT'S 'ſ 12345678 <|end_of_text|><tool>x \u2028\u00a0\u0085 x\u3000"
           " y xyzzy  xyzzy".encode())


class HuggingFaceTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.corpus, cls.hostile = tokenizer_texts("regex", "vescale-hf-tokenizer-",
                                                           HOSTILE)
        cls.files = {}
        for style in ("gpt2", "llama3"):
            folder = os.path.join(cls.tmp, style)
            os.makedirs(folder)
            path = os.path.join(folder, "tokenizer.json")
            subprocess.run([SYSTEM_PYTHON, REFERENCE, "train", cls.corpus, "--vocab-size", "800",
                            "--style", style, "-o", path], check=True, capture_output=True,
                           timeout=300)
            # A vocab entry no merge reaches: Llama 3's ignore_merges takes the whole word.
            with open(path) as f:
                spec = json.load(f)
            top = max(list(spec["model"]["vocab"].values()) +
                      [t["id"] for t in spec["added_tokens"]])
            spec["model"]["vocab"]["\u0120xyzzy"] = top + 1
            with open(path, "w") as f:
                json.dump(spec, f)
            cls.files[style] = path

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ids(self, tokenizer, path):
        result = run("tokenizer", "encode", "--tokenizer", tokenizer, path)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return [int(t) for t in result.stdout.split()]

    def reference_ids(self, tokenizer, path, add_special_tokens=False):
        special = ["--add-special-tokens"] if add_special_tokens else []
        result = subprocess.run([SYSTEM_PYTHON, REFERENCE, "encode", tokenizer, path, *special],
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return [int(t) for t in result.stdout.split()]

    def prepared(self, tokenizer, files, folder, summary):
        """`data prepare` of `files` on 2 threads into `folder`: its meta.json and tokens."""
        result = run("data", "prepare", *files, "--tokenizer", tokenizer, "-o", folder,
                     "--threads", "2")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        print(result.stdout.strip())
        self.assertIn(summary, result.stdout)
        with open(os.path.join(folder, "meta.json")) as f:
            return json.load(f), token_stream(folder)

    def decoded(self, tokenizer, ids):
        result = subprocess.run([BINARY, "tokenizer", "decode", "--tokenizer", tokenizer,
                                 *map(str, ids)], capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return result.stdout

    def test_token_for_token_with_the_reference(self):
        for style, tokenizer in self.files.items():
            for name, path in (("fortunes", self.corpus), ("hostile", self.hostile)):
                ours, theirs = self.ids(tokenizer, path), self.reference_ids(tokenizer, path)
                size = os.path.getsize(path)
                print(f"{style} {name}: {size} bytes -> {len(ours)} tokens "
                      f"({size / max(1, len(ours)):.2f} bytes a token), reference "
                      f"{len(theirs)} tokens, equal: {ours == theirs}")
                self.assertIsNone(first_difference(ours, theirs))
        # The folder names its tokenizer.json; ignore_merges took the word no merge reaches.
        llama3 = self.ids(os.path.dirname(self.files["llama3"]), self.hostile)
        self.assertEqual(llama3, self.reference_ids(self.files["llama3"], self.hostile))
        with open(self.files["llama3"]) as f:
            xyzzy = json.load(f)["model"]["vocab"]["\u0120xyzzy"]
        self.assertEqual(llama3.count(xyzzy), 2)
        self.assertNotIn(xyzzy, self.ids(self.files["gpt2"], self.hostile))

    def test_decode_gives_the_bytes_back(self):
        for tokenizer in self.files.values():
            ids = self.ids(tokenizer, self.hostile)
            self.assertEqual(self.decoded(tokenizer, ids), HOSTILE)
            ids = self.ids(tokenizer, self.corpus)[:20000]  # a command line's worth
            with open(self.corpus, "rb") as f:
                self.assertTrue(f.read().startswith(self.decoded(tokenizer, ids)))

    def test_data_prepare_streams_a_long_file_trains_and_generates_text(self):
        # One document of three read chunks, and the hostile text as a second: the tokens of
        # each whole file, then the end-of-text id (NOTE [Token files]).
        long = os.path.join(self.tmp, "long.txt")
        with open(long, "wb") as out:
            for _ in range(2):
                with open(self.corpus, "rb") as f:
                    out.write(f.read())
        tokenizer = self.files["gpt2"]
        folder = os.path.join(self.tmp, "tokens")
        meta, stream = self.prepared(tokenizer, [long, self.hostile], folder,
                                     "2 documents in 6 chunks")  # 4.9 MB in 1 MB reads, and 1
        self.assertTrue(meta["tokenizer"].startswith("hf-bpe crc32c:"))
        self.assertEqual((meta["vocab_size"], meta["dtype"]), (802, "uint16"))
        eot = meta["end_of_text"]
        expected = (self.reference_ids(tokenizer, long) + [eot] +
                    self.reference_ids(tokenizer, self.hostile) + [eot])
        self.assertIsNone(first_difference(stream, expected))
        job = os.path.join(self.tmp, "job")
        args = (os.path.join(ROOT, "configs", "gpt-tiny.toml"), f"--job.dump_folder={job}",
                "--data.source=tokens", f"--data.path={folder}", f"--data.tokenizer={tokenizer}",
                "--model.vocab_size=802", "--training.steps=5", "--checkpoint.interval=5",
                "--parallel.dp=1", "--parallel.tp=1")
        result = run("train", *args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        # Bytes: an untrained byte-level model may well answer with bytes that are not UTF-8.
        result = subprocess.run([BINARY, "generate", *args, "--checkpoint", "latest", "--prompt",
                                 "Your fortune: ", "--max-new-tokens", "8"],
                                capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertTrue(result.stdout.startswith(b"Your fortune: "), result.stdout)
        self.assertGreater(len(result.stdout), len(b"Your fortune: \n"))
        # A Hugging Face folder that carries its tokenizer.json answers text without
        # data.tokenizer.
        folder = os.path.join(self.tmp, "hf-model")
        result = run("export", os.path.join(job, "checkpoints", "step-000005"), "-o", folder,
                     "--format", "hf")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        shutil.copy(tokenizer, folder)
        plain = [a for a in args if not a.startswith("--data.tokenizer")]
        result = subprocess.run([BINARY, "generate", *plain, "--checkpoint", f"hf:{folder}",
                                 "--prompt", "Your fortune: ", "--max-new-tokens", "8"],
                                capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertTrue(result.stdout.startswith(b"Your fortune: "), result.stdout)

    def test_documents_and_prompts_begin_with_the_templates_bos(self):
        # NOTE [Document start]: Llama 3's post-processor puts <|begin_of_text|> before a text.
        # data prepare begins each document with it (a file's first chunk only), as the reference
        # encodes with add_special_tokens; generate begins a text prompt with it, and prints the
        # text after it.
        tokenizer = self.files["llama3"]
        with open(tokenizer) as f:
            template = json.load(f)["post_processor"]["processors"][1]
        bos = template["special_tokens"]["<|begin_of_text|>"]["ids"]
        folder = os.path.join(self.tmp, "llama3-tokens")
        meta, stream = self.prepared(tokenizer, [self.corpus, self.hostile], folder,
                                     "2 documents in 4 chunks")  # 2.4 MB in 1 MB reads, and 1
        self.assertEqual(meta["document_start"], bos)
        eot = meta["end_of_text"]
        corpus = self.reference_ids(tokenizer, self.corpus, add_special_tokens=True)
        hostile = self.reference_ids(tokenizer, self.hostile, add_special_tokens=True)
        self.assertEqual(corpus[:1], bos)
        self.assertIsNone(first_difference(stream, corpus + [eot] + hostile + [eot]))
        job = os.path.join(self.tmp, "llama3-job")
        args = (os.path.join(ROOT, "configs", "gpt-tiny.toml"), f"--job.dump_folder={job}",
                "--data.source=tokens", f"--data.path={folder}", f"--data.tokenizer={tokenizer}",
                f"--model.vocab_size={meta['vocab_size']}", "--training.steps=2",
                "--checkpoint.interval=2", "--parallel.dp=1", "--parallel.tp=1")
        result = run("train", *args)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        prompt = os.path.join(self.tmp, "prompt.txt")
        with open(prompt, "w") as f:
            f.write("Your fortune: ")
        result = subprocess.run([BINARY, "generate", *args, "--checkpoint", "latest",
                                 "--prompt-file", prompt, "--max-new-tokens", "4"],
                                capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertTrue(result.stdout.startswith(b"Your fortune: "), result.stdout)
        prompt_tokens = len(self.reference_ids(tokenizer, prompt, add_special_tokens=True))
        self.assertIn(f"[generate] {prompt_tokens} prompt tokens", result.stderr.decode())

    def test_other_kinds_are_one_line(self):
        with open(self.files["gpt2"]) as f:
            good = json.load(f)

        def template(special_tokens):
            return {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}},
                               {"Sequence": {"id": "A", "type_id": 0}}],
                    "special_tokens": special_tokens}

        def variant(name, change):
            spec = json.loads(json.dumps(good))
            change(spec)
            path = os.path.join(self.tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(spec, f)
            return path

        cases = [
            (variant("wordpiece", lambda s: s["model"].update(type="WordPiece")),
             'model.type "WordPiece" is not supported'),
            (variant("nfc", lambda s: s.update(normalizer={"type": "NFC"})),
             'normalizer "NFC" is not supported'),
            (variant("metaspace", lambda s: s.update(pre_tokenizer={"type": "Metaspace"})),
             'pre_tokenizer "Metaspace" is not supported'),
            (variant("merged", lambda s: s.update(pre_tokenizer={
                "type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext",
                     "invert": False}, good["pre_tokenizer"]]})),
             'Split with behavior "MergedWithNext" is not supported'),
            (variant("lookbehind", lambda s: s.update(pre_tokenizer={
                "type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated",
                     "invert": False}, good["pre_tokenizer"]]})),
             "a lookbehind or named group"),
            (variant("nobyte", lambda s: s["model"]["vocab"].pop("\u0120")),
             "model.vocab has no token for byte 0x20"),
            (variant("badmerge", lambda s: s["model"]["merges"].append("zz qq")),
             "is not in model.vocab"),
            (variant("template", lambda s: s.update(post_processor=template({}))),
             "post_processor's template names \"<x>\", which its special_tokens lack"),
            (variant("template-id", lambda s: s.update(post_processor=template(
                {"<x>": {"id": "<x>", "ids": [999999], "tokens": ["<x>"]}}))),
             "post_processor's special token \"<x>\" has id 999999, which is not among its tokens"),
        ]
        # [36]'s hostile files: each was taken, or died with bad_alloc or a raw json exception.
        first = next(iter(good["model"]["vocab"]))
        cases += [
            (variant("duplicate-id", lambda s: s["model"]["vocab"].update(
                {"zzz": s["model"]["vocab"][first]})), "model.vocab gives id"),
            (variant("float-id", lambda s: s["model"]["vocab"].update(zzz=1.5)),
             'model.vocab["zzz"] is 1.5, not a whole-number id'),
            (variant("string-merges", lambda s: s["model"].update(merges="a b")),
             "model.merges is a string, not a list of merges"),
            (variant("huge-id", lambda s: s["model"]["vocab"].update(zzz=2000000000)),
             "its ids reach 2000000000"),
            (variant("no-vocab", lambda s: s["model"].pop("vocab")),
             "lacks a key the format needs: key 'vocab' not found"),
            (variant("added-takes-id", lambda s: s["added_tokens"].append(
                {"id": s["model"]["vocab"][first], "content": "<taken>"})),
             'added token "<taken>" takes id'),
        ]
        for name, text, needle in (("list", "[1, 2]", "is JSON but an array"),
                                   ("string", '"tokenizer"', "is JSON but a string")):
            path = os.path.join(self.tmp, name + ".json")
            with open(path, "w") as f:
                f.write(text)
            cases.append((path, needle))
        broken = os.path.join(self.tmp, "broken.json")
        with open(broken, "w") as f:
            f.write('{"model": {"type": "BPE", "vocab": {')
        cases.append((broken, "is not JSON"))
        empty_folder = os.path.join(self.tmp, "empty-folder")
        os.makedirs(empty_folder, exist_ok=True)
        cases.append((empty_folder, "holds neither tokenizer.json nor tokenizer.model"))
        for path, needle in cases:
            result = run("tokenizer", "encode", "--tokenizer", path, "--text", "x")
            self.assertEqual(result.returncode, 2, (path, result.stderr))
            self.assertIn(needle, result.stderr)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            print(result.stderr.strip())


if __name__ == "__main__":
    unittest.main()

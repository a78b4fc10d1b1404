"""Tokenizers end to end (NOTE [Tokenizers]): `tokenizer train` writes a SentencePiece model with
the library's trainer, and `tokenizer encode` gives the ids Debian's python3-sentencepiece gives on
the same model, token for token, on the fortunes corpus and on a hostile text; decode(encode(x))
== x wherever the model is lossless. Bad input is one line, exit 2."""
import json
import os
import shutil
import subprocess
import unittest

from common import (BINARY, SYSTEM_PYTHON, first_difference, run, token_stream,
                    tokenizer_texts)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Every byte value, bytes that are not UTF-8, long runs of whitespace, emoji and CJK.
HOSTILE = (bytes(range(256)) + b"\xff\xfe\xc3(\xa0\xa1 \xe2\x82 \xf0\x28\x8c\xbc" + b" " * 300 +
           b"\t\t\n\n\n\r\n" + "😀👩‍👩‍👧‍👦 🇯🇵 中文分词测试 日本語のテキスト 한국어 "
           "café naïve ﬁ Ω".encode() + b"\n" * 50 + b"end")

class Tokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp, cls.corpus, cls.hostile = tokenizer_texts("sentencepiece", "vescale-tokenizer-",
                                                           HOSTILE)
        cls.model = os.path.join(cls.tmp, "bpe.model")
        result = run("tokenizer", "train", cls.corpus, "--vocab-size", "2000", "--special",
                     "<|endoftext|>", "-o", cls.model, timeout=600)
        if "has no SentencePiece" in result.stderr:
            raise unittest.SkipTest(result.stderr.strip())
        assert result.returncode == 0, result.stderr[-3000:]
        print(result.stdout.strip())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ids(self, model, path):
        result = run("tokenizer", "encode", "--tokenizer", model, path)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return [int(t) for t in result.stdout.split()]

    def python_ids(self, model, path, add_bos=False):
        script = ("import sys, sentencepiece as spm\n"
                  "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
                  "data = open(sys.argv[2], 'rb').read()\n"
                  "print(' '.join(map(str, sp.encode(data, add_bos=sys.argv[3] == '1'))))\n")
        result = subprocess.run([SYSTEM_PYTHON, "-c", script, model, path, str(int(add_bos))],
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return [int(t) for t in result.stdout.split()]

    def assert_one_line_error(self, args, needle):
        result = run(*args)
        self.assertEqual(result.returncode, 2, (args, result.stderr))
        self.assertIn(needle, result.stderr)
        self.assertEqual(len([l for l in result.stderr.splitlines() if "error" in l]), 1,
                         result.stderr)

    def decoded(self, model, ids):
        result = subprocess.run([BINARY, "tokenizer",
                                 "decode", "--tokenizer", model, *map(str, ids)],
                                capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return result.stdout

    def test_token_for_token_with_python_sentencepiece(self):
        for name, path in (("fortunes", self.corpus), ("hostile", self.hostile)):
            ours, theirs = self.ids(self.model, path), self.python_ids(self.model, path)
            size = os.path.getsize(path)
            print(f"{name}: {size} bytes -> {len(ours)} tokens ({size / max(1, len(ours)):.2f} "
                  f"bytes a token), python3-sentencepiece {len(theirs)} tokens, equal: "
                  f"{ours == theirs}")
            self.assertIsNone(first_difference(ours, theirs))

    def test_decode_gives_the_text_back(self):
        # SentencePiece's normaliser reads UTF-8: each byte that is not becomes U+FFFD, so the
        # round trip holds on UTF-8 text (every other byte of the hostile text included).
        valid = os.path.join(self.tmp, "hostile-utf8.txt")
        with open(valid, "wb") as f:
            f.write(HOSTILE.decode("utf-8", "ignore").encode("utf-8"))
        for path in (self.corpus, valid):
            with open(path, "rb") as f:
                text = f.read()
            ids = self.ids(self.model, path)
            if path == self.corpus:  # too long for a command line: its first 20,000 tokens
                part = self.decoded(self.model, ids[:20000])
                self.assertGreater(len(part), 40000)
                self.assertTrue(text.startswith(part))
            else:
                self.assertEqual(self.decoded(self.model, ids), text)
        ids = self.ids(self.model, self.hostile)
        self.assertIn("\ufffd".encode(), self.decoded(self.model, ids))

    def test_unigram_and_the_special_token(self):
        model = os.path.join(self.tmp, "unigram.model")
        result = run("tokenizer", "train", self.corpus, "--type", "unigram", "--vocab-size", "1000",
                     "--special", "<|endoftext|>", "-o", model, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(self.ids(model, self.hostile), self.python_ids(model, self.hostile))
        result = run("tokenizer", "encode", "--tokenizer", model, "--text", "a<|endoftext|>b")
        self.assertEqual(len(result.stdout.split()), 3, result.stdout)

    def test_data_prepare_trains_and_generates_text(self):
        # NOTE [Token files]: 4 documents in order, each its encoding and the end-of-text id.
        with open(self.corpus, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        parts = []
        for k in range(4):
            parts.append(os.path.join(self.tmp, f"part{k}.txt"))
            with open(parts[-1], "wb") as f:
                f.write(b"".join(lines[k * len(lines) // 4:(k + 1) * len(lines) // 4]))
        folder = os.path.join(self.tmp, "tokens")
        result = run("data", "prepare", *parts, "--tokenizer", self.model, "-o", folder,
                     "--val-fraction", "0.1", "--threads", "2")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        print(result.stdout.strip())
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual((meta["vocab_size"], meta["dtype"], meta["documents"]), (2000, "uint16", 4))
        self.assertTrue(meta["tokenizer"].startswith("sentencepiece crc32c:"))
        stream = token_stream(folder)
        expected = []
        for part in parts:
            expected += self.python_ids(self.model, part) + [meta["end_of_text"]]
        self.assertIsNone(first_difference(stream, expected))
        self.assertEqual(meta["val_tokens"], int(len(expected) * 0.1))
        # Trained on the tokens, prompted with text, answering in text.
        job = os.path.join(self.tmp, "job")
        args = (os.path.join(ROOT, "configs", "gpt-tiny.toml"), f"--job.dump_folder={job}",
                "--data.source=tokens", f"--data.path={folder}", f"--data.tokenizer={self.model}",
                "--model.vocab_size=2000", "--training.steps=5", "--checkpoint.interval=5")
        result = run("train", *args, "--parallel.dp=1", "--parallel.tp=1")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        result = run("generate", *args, "--parallel.dp=1", "--parallel.tp=1", "--checkpoint",
                     "latest", "--prompt", "Your fortune: ", "--max-new-tokens", "8")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertTrue(result.stdout.startswith("Your fortune: "), result.stdout)
        self.assertGreater(len(result.stdout), len("Your fortune: \n"))

    def test_data_prepare_streams_a_long_file(self):
        # The corpus and UTF-8 hostile text as one document of several read chunks, cut before
        # spaces (NOTE [SentencePiece streaming]): the tokens of the whole file.
        long = os.path.join(self.tmp, "long.txt")
        with open(long, "wb") as out, open(self.corpus, "rb") as f:
            out.write(f.read() + HOSTILE.decode("utf-8", "ignore").encode("utf-8"))
        folder = os.path.join(self.tmp, "long-tokens")
        result = run("data", "prepare", long, "--tokenizer", self.model, "-o", folder,
                     "--threads", "2")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        print(result.stdout.strip())
        self.assertIn("1 documents in 3 chunks", result.stdout)  # 2.4 MB in 1 MB reads
        stream = token_stream(folder)
        with open(os.path.join(folder, "meta.json")) as f:
            eot = json.load(f)["end_of_text"]
        self.assertIsNone(first_difference(stream, self.python_ids(self.model, long) + [eot]))

    def test_documents_begin_with_the_bos_tokenizer_config_asks_for(self):
        # NOTE [Document start]: Llama 2's tokenizer_config.json beside the model (add_bos_token;
        # bos_token "<s>" where it names none): each document begins with the BOS, as the
        # library's add_bos gives it; `tokenizer encode` stays the text's ids alone.
        folder = os.path.join(self.tmp, "llama2-style")
        os.makedirs(folder, exist_ok=True)
        model = os.path.join(folder, "tokenizer.model")
        shutil.copy(self.model, model)
        config = os.path.join(folder, "tokenizer_config.json")
        with open(config, "w") as f:
            json.dump({"add_bos_token": True, "add_eos_token": False}, f)
        with open(self.corpus, "rb") as f:
            lines = f.read().splitlines(keepends=True)[:400]
        parts = []
        for k in range(2):
            parts.append(os.path.join(self.tmp, f"bos-part{k}.txt"))
            with open(parts[-1], "wb") as f:
                f.write(b"".join(lines[k * 200:(k + 1) * 200]))
        out = os.path.join(self.tmp, "bos-tokens")
        result = run("data", "prepare", *parts, "--tokenizer", folder, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        stream = token_stream(out)
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
        expected = []
        for part in parts:
            expected += self.python_ids(model, part, add_bos=True) + [meta["end_of_text"]]
        self.assertIsNone(first_difference(stream, expected))
        bos = expected[0]
        self.assertEqual(meta["document_start"], [bos])
        self.assertNotEqual(self.python_ids(model, parts[0])[0], bos)
        self.assertEqual(self.ids(folder, parts[0]), self.python_ids(model, parts[0]))
        for text, needle in (('{"add_bos_token": true, "bos_token": "<nope>"}',
                              'bos_token "<nope>" is no piece of the model'),
                             ('{"add_bos_token": "yes"}', 'add_bos_token = "yes"'),
                             ('{"add_bos_token": tru', "tokenizer_config.json is not JSON")):
            with open(config, "w") as f:
                f.write(text)
            self.assert_one_line_error(("tokenizer", "encode", "--tokenizer", folder, "--text",
                                        "x"), needle)

    def test_bad_input_is_one_line(self):
        cases = [
            (("tokenizer", "encode", "--tokenizer", os.path.join(self.tmp, "missing.model"),
              "--text", "x"), "no such file"),
            (("tokenizer", "encode", "--tokenizer", self.hostile, "--text", "x"),
             "not a SentencePiece model"),
            (("tokenizer", "train", self.hostile, "--type", "wordpiece", "-o",
              os.path.join(self.tmp, "x.model")), "--type wordpiece is not one of bpe, unigram"),
            (("tokenizer", "train", os.path.join(self.tmp, "none.txt"), "-o",
              os.path.join(self.tmp, "x.model")), "none.txt"),
            (("tokenizer", "decode", "--tokenizer", self.model, "999999"),
             "id 999999 is outside its vocabulary of 2000"),
        ]
        empty = os.path.join(self.tmp, "empty.txt")
        open(empty, "w").close()
        cases.append((("tokenizer", "train", empty, "-o", os.path.join(self.tmp, "x.model")),
                      "hold no text"))
        bad = os.path.join(self.tmp, "latin1.txt")
        with open(bad, "wb") as f:
            f.write("caf\u00e9".encode("latin-1"))
        cases += [
            (("data", "prepare", bad, "--tokenizer", self.model, "-o", os.path.join(self.tmp, "x")),
             "is not UTF-8 (byte 233 at offset 3)"),
            (("data", "prepare", empty, "-o", os.path.join(self.tmp, "x")), "holds no text"),
            (("data", "prepare", self.hostile, "--tokenizer", self.hostile, "-o",
              os.path.join(self.tmp, "x")), "not a SentencePiece model"),
        ]
        for args, needle in cases:
            self.assert_one_line_error(args, needle)


if __name__ == "__main__":
    unittest.main()

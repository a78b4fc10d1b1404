"""Our tokenizers against the libraries themselves (the pinned versions of
python/requirements.txt):
- a byte-level BPE that the `tokenizers` library trains and saves as tokenizer.json: `tokenizer
  encode` gives, token for token, the library's ids on a corpus of 5 MB and more (the fortunes,
  the source of the transformers package, a hostile text), and `tokenizer decode` gives the bytes
  of the library's vocabulary back;
- SentencePiece models that `tokenizer train` writes (Debian's libsentencepiece): `tokenizer
  encode` gives the ids of the `sentencepiece` wheel, a BPE's on the whole corpus, a unigram's on
  each fortune (`data prepare` of them as JSON lines) but where two segmentations score the same.

NOTE [SentencePiece versions]: we link Debian 12's libsentencepiece 0.1.97, the wheel is 0.2.
Their unigram encoders part in two ways. Where two segmentations score the same (five '▁' then
two, or two then five), each takes its own: both are best. And on a text of many kilobytes in one
piece (a whole corpus), 0.1.97 takes a segmentation of lower score at some words (about 2 in
10,000 tokens), which 0.2 does not; on the fortunes, one at a time, the two agree but at ties.
docs/limits.md says so."""
import glob
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest

import sentencepiece
import tokenizers
import transformers
from tokenizers import decoders, models, pre_tokenizers, trainers

from clients import BINARY, ROOT, first_difference, run, token_stream  # puts tests/e2e on the path
from bytelevel_bpe_reference import CHAR_TO_BYTE  # GPT-2's byte table, inverted

CORPUS_BYTES = 5_000_000
# Long runs of whitespace, emoji, CJK, accents, ligatures, the special token, contractions in both
# cases, digits, Unicode spaces (valid UTF-8: the library takes text).
HOSTILE = (" " * 300 + "\t\t\n\n\n\r\n" + "😀👩‍👩‍👧‍👦 🇯🇵 中文分词测试 日本語のテキスト 한국어 "
           "café naïve ﬁ Ω" + "\n" * 50 + "end<|endoftext|> it's IT'S 'ſ 12345678 "
           "\u2028\u00a0\u0085 x\u3000 y xyzzy  xyzzy")


class Tokenizers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vescale-clients-tokenizers-")
        fortunes = os.path.join(cls.tmp, "fortunes.txt")
        subprocess.run([os.path.join(ROOT, "scripts", "prepare_fortunes.sh"), fortunes],
                       check=True, capture_output=True)
        with open(fortunes, encoding="utf-8", errors="replace") as f:
            cls.fortunes = f.read()
        # Then Python source, whose indentation, operators and identifiers are another kind of
        # text, until the corpus passes 5 MB.
        parts, size = [cls.fortunes], len(cls.fortunes.encode())
        package = os.path.dirname(transformers.__file__)
        for path in sorted(glob.glob(os.path.join(package, "models", "*", "modeling_*.py"))):
            if size >= CORPUS_BYTES:
                break
            with open(path, encoding="utf-8", errors="replace") as f:
                parts.append(f.read())
            size += len(parts[-1].encode())
        parts.append(HOSTILE)
        cls.text = "".join(parts)
        cls.corpus = os.path.join(cls.tmp, "corpus.txt")
        with open(cls.corpus, "w", encoding="utf-8") as f:
            f.write(cls.text)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ids(self, tokenizer, path):
        result = run("tokenizer", "encode", "--tokenizer", tokenizer, path, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return [int(t) for t in result.stdout.split()]

    def decoded(self, tokenizer, ids):
        result = subprocess.run([BINARY, "tokenizer", "decode", "--tokenizer", tokenizer,
                                 *map(str, ids)], capture_output=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        return result.stdout

    def test_byte_level_bpe_the_tokenizers_library_trained(self):
        bpe = tokenizers.Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        bpe.train_from_iterator(self.fortunes.split("\n\n"), trainer)
        path = os.path.join(self.tmp, "tokenizer.json")
        bpe.save(path)
        ours = self.ids(path, self.corpus)
        theirs = bpe.encode(self.text, add_special_tokens=False).ids
        size = os.path.getsize(self.corpus)
        print(f"tokenizers {tokenizers.__version__} byte-level BPE (2,000 pieces): {size} bytes "
              f"-> {len(ours)} tokens, the library {len(theirs)}, first difference "
              f"{first_difference(ours, theirs)}")
        self.assertGreaterEqual(size, CORPUS_BYTES)
        self.assertIsNone(first_difference(ours, theirs))
        self.assertIn(bpe.token_to_id("<|endoftext|>"), ours)
        # Decode: the library's vocabulary, byte for byte, and the corpus's first and last bytes.
        special = {bpe.token_to_id("<|endoftext|>"): b"<|endoftext|>"}
        data = self.text.encode()
        for piece, whole in ((ours[:20000], data.startswith), (ours[-20000:], data.endswith)):
            text = self.decoded(path, piece)
            self.assertEqual(text, b"".join(special.get(i) or bytes(
                CHAR_TO_BYTE[c] for c in bpe.id_to_token(i)) for i in piece))
            self.assertTrue(whole(text))

    def test_sentencepiece_models_we_train(self):
        sample = os.path.join(self.tmp, "sample.txt")  # 1 MB of fortunes: trains in seconds
        with open(sample, "w", encoding="utf-8") as f:
            f.write(self.fortunes[:1_000_000])
        # Each fortune a document of a JSON-lines file: data prepare encodes them one by one.
        documents = [d for d in self.fortunes.split("\n\n") if d.strip()]
        lines = os.path.join(self.tmp, "fortunes.jsonl")
        with open(lines, "w", encoding="utf-8") as f:
            for d in documents:
                f.write(json.dumps({"text": d}) + "\n")
        for kind in ("bpe", "unigram"):
            model = os.path.join(self.tmp, f"{kind}.model")
            result = run("tokenizer", "train", sample, "--type", kind, "--vocab-size", "1000",
                         "--special", "<|endoftext|>", "-o", model, timeout=600)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            processor = sentencepiece.SentencePieceProcessor(model_file=model)
            if kind == "bpe":  # the whole corpus at once
                with open(self.corpus, "rb") as f:
                    theirs = processor.encode(f.read())
                ours = self.ids(model, self.corpus)
                print(f"SentencePiece BPE (1,000 pieces, ours): {len(ours)} tokens, the "
                      f"sentencepiece {sentencepiece.__version__} wheel {len(theirs)}, first "
                      f"difference {first_difference(ours, theirs)}")
                self.assertIsNone(first_difference(ours, theirs))
                continue
            # NOTE [SentencePiece versions]: unigram, document by document.
            folder = os.path.join(self.tmp, "unigram-tokens")
            result = run("data", "prepare", lines, "--tokenizer", model, "-o", folder,
                         timeout=600)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            with open(os.path.join(folder, "meta.json")) as f:
                end = json.load(f)["end_of_text"]
            stream, ours = token_stream(folder), [[]]
            for token in stream:
                if token == end:
                    ours.append([])
                else:
                    ours[-1].append(token)
            ours.pop()
            theirs = processor.encode(documents)
            self.assertEqual(len(ours), len(theirs))
            scores = [processor.get_score(i) for i in range(processor.get_piece_size())]
            ties = [k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b]
            print(f"SentencePiece unigram (1,000 pieces, ours): {len(documents)} documents, "
                  f"{len(stream)} tokens; {len(documents) - len(ties)} encode as the "
                  f"sentencepiece {sentencepiece.__version__} wheel does, {len(ties)} take "
                  f"another segmentation of the same score")
            for k in ties:
                ours_score, theirs_score = (math.fsum(scores[i] for i in ids)
                                            for ids in (ours[k], theirs[k]))
                self.assertAlmostEqual(ours_score, theirs_score, delta=1e-9 * abs(theirs_score),
                                       msg=documents[k][:200])
                self.assertEqual(processor.decode(ours[k]), processor.decode(theirs[k]))
            self.assertLess(len(ties), len(documents) // 100)

if __name__ == "__main__":
    unittest.main()

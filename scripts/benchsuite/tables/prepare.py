"""prepare: data prepare of a 537 MB corpus with a SentencePiece model, a byte-level BPE and raw
bytes, on 1 and 2 threads: tokens, bytes a token, seconds, MB/s, peak RSS; outputs compared."""
import os
import re
import shutil

from benchsuite import markdown, process
from benchsuite.tables.prepare_run import prepare, same_files, train_bpe

_SUMMARY = re.compile(r"-> (\d+) tokens \(([\d.]+) bytes a token.* in ([\d.]+)s, ([\d.]+) MB/s")
FILES = range(101, 211)


def row(label, threads, output, peak):
    """A row from `data prepare`'s output and peak RSS."""
    tokens, per_token, seconds, mb_s = _SUMMARY.search(output).groups()
    return markdown.row(label, threads, f"{int(tokens):,}", per_token, seconds, mb_s, peak)


def make_corpus(folder):
    """110 files, each the fortunes corpus twice over; returns their paths."""
    os.makedirs(folder, exist_ok=True)
    with open("data/fortunes.txt", "rb") as f:
        text = f.read()
    paths = [os.path.join(folder, f"part{i}.txt") for i in FILES]
    for path in paths:
        with open(path, "wb") as f:
            f.write(text + text)
    return paths


def run(ctx):
    print()
    print("data prepare: 110 files of the fortunes corpus twice over (537 MB), a 2,000-piece SentencePiece")
    print("BPE model trained on the corpus (tokenizer train), a GPT-2 style byte-level BPE tokenizer.json")
    print("of 2,000 tokens (trained by tests/e2e/bytelevel_bpe_reference.py), and raw bytes; wall time")
    print("and peak RSS by getrusage; the outputs of 1 and 2 threads compared byte for byte")
    print(markdown.header("tokenizer", "threads", "tokens", "bytes a token", "seconds", "MB/s",
                          "peak RSS"))
    corpus = make_corpus(ctx.path("prepare-corpus"))
    spm = ctx.path("prepare.model")
    process.run([ctx.train, "tokenizer", "train", "data/fortunes.txt", "--vocab-size", "2000",
                 "-o", spm], stderr=None)
    bpe = train_bpe(ctx, "prepare-tokenizer.json")
    for label, tokenizer, threads in (("sentencepiece", spm, "1"), ("sentencepiece", spm, "2"),
                                      ("hf-bpe", bpe, "1"), ("hf-bpe", bpe, "2"),
                                      ("bytes", "bytes", "2")):
        print(row(label, threads, *prepare(ctx, corpus, tokenizer, f"prepare-{label}-{threads}",
                                           threads)))
    for label in ("sentencepiece", "hf-bpe"):
        same = same_files(ctx.path(f"prepare-{label}-1", "train.bin"),
                          ctx.path(f"prepare-{label}-2", "train.bin"))
        print(f"{label}, 1 and 2 threads: " + ("identical train.bin" if same else "train.bin DIFFERS"))
    shutil.rmtree(ctx.path("prepare-corpus"))

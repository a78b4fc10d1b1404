"""jsonl: data prepare of ~550 MB of JSON lines, plain, gzip and zstd, on 1 and 2 threads, with a
2,000-token byte-level BPE (and bytes once): seconds, MB/s of JSON, peak RSS; outputs compared."""
import json
import os
import re
import shutil

from benchsuite import disk, markdown, process
from benchsuite.tables.prepare_run import prepare, same_files, train_bpe

_SUMMARY = re.compile(r" in ([\d.]+)s, ([\d.]+) MB/s")
FORMATS = (("plain", "c.jsonl"), ("gzip", "c.jsonl.gz"), ("zstd", "c.jsonl.zst"))
REPEATS = 200


def row(label, fmt, size_mb, threads, output, peak):
    """A row from `data prepare`'s output, the file's MB and the peak RSS."""
    seconds, mb_s = _SUMMARY.search(output).groups()
    return markdown.row(label, fmt, f"{size_mb} MB", threads, seconds, mb_s, peak)


def write_corpus(path, text, repeats=REPEATS):
    """{"id", "text"} lines of text's paragraphs (split at blank lines), repeats times over."""
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    with open(path, "w", encoding="utf-8") as f:
        n = 0
        for _ in range(repeats):
            for p in paras:
                f.write(json.dumps({"id": n, "text": p}, ensure_ascii=False) + "\n")
                n += 1


def run_row(ctx, label, tokenizer, fmt, path, threads):
    """Prepares the file at path and returns its row."""
    output, peak = prepare(ctx, [path], tokenizer, f"jsonl-{label}-{fmt}-{threads}", threads)
    return row(label, fmt, disk.disk_mib(path), threads, output, peak)


def run(ctx):
    print()
    print("data prepare of JSON lines: ~550 MB of {\"id\", \"text\"} lines (the fortunes corpus's paragraphs")
    print("200 times over), plain, gzip (-6) and zstd (-3), with a GPT-2 style byte-level BPE tokenizer.json")
    print("of 2,000 tokens (as the data prepare table's), and raw bytes (whose 2 bytes a byte of output make")
    print("it the disk's speed); wall time and peak RSS by getrusage; MB/s of JSON read; every BPE")
    print("output compared byte for byte with the plain file's at 1 thread")
    print(markdown.header("tokenizer", "format", "file", "threads", "seconds", "MB/s of JSON",
                          "peak RSS"))
    corpus = ctx.path("jsonl")
    os.makedirs(corpus, exist_ok=True)
    plain = os.path.join(corpus, "c.jsonl")
    with open("data/fortunes.txt", encoding="utf-8") as f:
        write_corpus(plain, f.read())
    process.run(["gzip", "-6", "-k", plain])
    process.run(["zstd", "-q", "-3", "-k", plain])
    bpe = train_bpe(ctx, "jsonl-tokenizer.json")
    for threads in ("1", "2"):
        for fmt, name in FORMATS:
            print(run_row(ctx, "hf-bpe", bpe, fmt, os.path.join(corpus, name), threads))
    print(run_row(ctx, "bytes", "bytes", "plain", plain, "2"))
    reference = ctx.path("jsonl-hf-bpe-plain-1")
    for other in ("plain-2", "gzip-1", "gzip-2", "zstd-1", "zstd-2"):
        if not all(same_files(os.path.join(reference, f), ctx.path(f"jsonl-hf-bpe-{other}", f))
                   for f in ("train.bin", "val.bin")):
            print(f"jsonl {other}: token files DIFFER from plain at 1 thread")
    print("every format and thread count: the same train.bin and val.bin")
    for name in os.listdir(ctx.out):
        if name.startswith("jsonl"):
            path = ctx.path(name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)

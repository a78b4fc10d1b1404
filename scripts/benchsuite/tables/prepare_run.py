"""`data prepare` under peak_rss.py: the output the prepare and jsonl tables read."""
from benchsuite import peak_rss, process
from benchsuite.pythons import SYSTEM_PYTHON


def prepare(ctx, inputs, tokenizer, folder, threads):
    """Runs `data prepare` of inputs into the scratch folder's folder; returns (its output, its
    peak RSS as `N MiB`)."""
    output = process.run(process.with_peak_rss(
        [ctx.train, "data", "prepare", *inputs, "--tokenizer", tokenizer, "-o", ctx.path(folder),
         "--threads", threads]))
    return output, peak_rss.mib(peak_rss.parse_kib(output))


def train_bpe(ctx, name):
    """A GPT-2 style byte-level BPE tokenizer.json of 2,000 tokens trained on the fortunes
    (tests/e2e/bytelevel_bpe_reference.py) into the scratch folder; returns its path."""
    path = ctx.path(name)
    process.run([SYSTEM_PYTHON, "tests/e2e/bytelevel_bpe_reference.py", "train",
                 "data/fortunes.txt", "--vocab-size", "2000", "--style", "gpt2", "-o", path])
    return path


def same_files(a, b):
    """Whether two files hold the same bytes (`cmp -s`)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True

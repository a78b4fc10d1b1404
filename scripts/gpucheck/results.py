"""Where the table goes: DIR/table.txt, bench/results/<gpu>-<YYYY-MM-DD>.txt on a GPU, and, when
OUT is set (the GPU machine's tool brings back only what is under $OUT), $OUT with every run's
output in $OUT/logs.tgz."""
import os
import re
import shutil
import tarfile

RESULTS_DIR = "bench/results"  # relative to the repository root


def gpu_short_name(name):
    """"NVIDIA H100 80GB HBM3" -> h100, "NVIDIA A100-SXM4-80GB" -> a100: the words up to the
    first with a digit, less the vendor's and the product line's."""
    words = [w for w in re.split(r"[\s_-]+", name)
             if w and w.lower() not in ("nvidia", "geforce", "tesla", "quadro")]
    short = []
    for word in words:
        short.append(word.lower())
        if re.search(r"\d", word):
            break
    return re.sub(r"[^a-z0-9]", "", "".join(short)) or "gpu"


def results_path(gpu_name, day):
    """bench/results/<gpu>-<day>.txt for the GPU named `gpu_name` on `day` (YYYY-MM-DD)."""
    return f"{RESULTS_DIR}/{gpu_short_name(gpu_name)}-{day}.txt"


def publish(text, out_dir, results="", out=""):
    """Writes the table `text` to out_dir/table.txt, to `results` (a path, or "" for none) and,
    when `out` is set, into that folder (named as `results`, else table.txt) with out_dir/logs as
    out/logs.tgz. Called after every stage, so that a call cut short still brings back what it
    measured."""
    table = os.path.join(out_dir, "table.txt")
    with open(table, "w") as f:
        f.write(text)
    if results:
        os.makedirs(os.path.dirname(results), exist_ok=True)
        shutil.copyfile(table, results)
    if out:
        os.makedirs(out, exist_ok=True)
        shutil.copyfile(table, os.path.join(out, os.path.basename(results) or "table.txt"))
        with tarfile.open(os.path.join(out, "logs.tgz"), "w:gz") as tar:
            tar.add(os.path.join(out_dir, "logs"), arcname="logs")

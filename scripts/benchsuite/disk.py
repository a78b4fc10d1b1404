"""Bytes on disk, as du counts them, and the disk's write speed, as dd measures it."""
import math
import os

from benchsuite.process import BenchError, run


def apparent_bytes(path):
    """The apparent size of a folder and everything under it, folders included, each hard-linked
    file once (`du -sb`)."""
    seen = set()
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [None, *files]:
            st = os.lstat(root if name is None else os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def disk_mib(path):
    """A file's disk usage in MiB, rounded up (`du -m`)."""
    return math.ceil(os.stat(path).st_blocks * 512 / 2**20)


def dd_mb_s(summary):
    """MB/s from dd's last line: `N bytes (...) copied, S s, ...`."""
    words = summary.split()
    return float(words[0]) / 1e6 / float(words[words.index("copied,") + 1])


def write_mb_s(folder, nbytes):
    """The MB/s of writing nbytes (whole MiB) of zeros into folder with `dd conv=fsync`."""
    if nbytes < 1048576:
        raise BenchError(f"[bench] dd into {folder}: {nbytes} bytes is under the 1 MiB it writes")
    target = os.path.join(folder, "ddtest")
    try:
        output = run(["dd", "if=/dev/zero", f"of={target}", "bs=1M",
                      f"count={nbytes // 1048576}", "conv=fsync"])
    finally:
        if os.path.exists(target):
            os.remove(target)
    return dd_mb_s(output.splitlines()[-1])

"""The peak resident memory of a command's largest process, workers included.

    python3 peak_rss.py COMMAND [ARG ...]

runs COMMAND, then prints `max RSS KiB N` on standard error and exits with its status. N is
getrusage's RUSAGE_CHILDREN ru_maxrss: every launcher measured here waits for its workers, so it is
the largest process of the tree. A separate process, so each measurement has its own children."""
import re
import resource
import subprocess
import sys

_LINE = re.compile(r"^max RSS KiB (\d+)$", re.MULTILINE)


def parse_kib(output):
    """The last `max RSS KiB N` of output, as an int, or None."""
    found = _LINE.findall(output)
    return int(found[-1]) if found else None


def mib(kib):
    """KiB as `N MiB`, rounded (as /usr/bin/time's %M over 1024 was printed)."""
    return f"{kib / 1024:.0f} MiB"


def main(argv):
    """Runs argv, prints its peak RSS line, returns its exit status."""
    code = subprocess.run(argv).returncode
    print("max RSS KiB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

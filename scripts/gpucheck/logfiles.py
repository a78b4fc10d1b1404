"""Reading the runs' logs as the shell's grep, tail and cut did; a missing log reads as empty."""
import re


def read(path):
    """The text of `path`, or "" when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def lines(path):
    """The lines of `path`, without their line ends."""
    return read(path).splitlines()


def tail(path, count=1):
    """The last `count` lines of `path`."""
    return lines(path)[-count:]


def last_line(path):
    """The last line of `path` ("" when it has none)."""
    found = tail(path)
    return found[0] if found else ""


def first_match(path, pattern):
    """The first line of `path` in which regular expression `pattern` occurs, or None."""
    search = re.compile(pattern).search
    return next((line for line in lines(path) if search(line)), None)


def cut(text, width):
    """The first `width` bytes of `text`, as `cut -c1-WIDTH` keeps them."""
    return text.encode()[:width].decode(errors="ignore")


def indented(text_lines):
    """Lines shown under a progress line, as the shell's `sed 's/^/    /'` showed them."""
    for line in text_lines:
        print(f"    {line}", flush=True)

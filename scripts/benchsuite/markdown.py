"""Markdown tables as the tables print them."""


def header(*columns):
    """A table's header row and its `| --- |` line."""
    return f"{row(*columns)}\n{row(*('---' for _ in columns))}"


def row(*cells):
    """One row: `| a | b |`."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def mib(nbytes, digits=2):
    """Bytes as `X.XX MiB`."""
    return f"{nbytes / 2**20:.{digits}f} MiB"

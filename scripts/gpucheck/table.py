"""The table a call prints last: its header, each section's rows, and the summary line that
counts every check's outcome (ok, FAIL or skipped)."""
from dataclasses import dataclass, field

PARITY_HEADER = ("| parity: max relative difference | figure | bar | result |\n"
                 "| --- | --- | --- | --- |")
BENCH_COLUMNS = ("tokens/s", "MFU", "median ms", "peak allocated", "peak reserved",
                 "nvidia-smi max", "warm-up s", "loss first → last",
                 "phases, median ms on the host's clock")
CPU_NOTE = '(* --cpu: the "cuda" side ran on the CPU)'


@dataclass
class Report:
    """Every row a call made so far, by section, and the count of each outcome."""
    mode: str  # "gpu" or "cpu"
    header: list = field(default_factory=list)
    build: list = field(default_factory=list)
    stages: list = field(default_factory=list)  # a stage skipped as a whole
    parity: list = field(default_factory=list)
    kernels: list = field(default_factory=list)  # the kernel rows the parity runs took
    kernel_tests: list = field(default_factory=list)
    bench: list = field(default_factory=list)
    bench_title: str = ""
    mfu: list = field(default_factory=list)
    profile: list = field(default_factory=list)
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def tally(self, verdict):
        """Counts a check's outcome: "ok", "FAIL" or anything else for skipped."""
        if verdict == "ok":
            self.passed += 1
        elif verdict == "FAIL":
            self.failed += 1
        else:
            self.skipped += 1

    def add(self, section, row, verdict=None):
        """Appends `row` to the named section's list, counting `verdict` if one is given."""
        getattr(self, section).append(row)
        if verdict is not None:
            self.tally(verdict)

    def summary(self):
        return f"gpu-check: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"

    def text(self):
        """The whole table, each line ending in a newline."""
        out = [*self.header, "", *self.build, *self.stages, ""]
        if self.parity:
            out += [PARITY_HEADER, *self.parity]
            out += [CPU_NOTE] if self.mode == "cpu" else []
            out.append("")
        for rows in (self.kernels, self.kernel_tests):
            out += [*rows, ""] if rows else []
        if self.bench:
            out += [bench_header(self.bench_title), *self.bench, ""]
        for rows in (self.mfu, self.profile):
            out += [*rows, ""] if rows else []
        out.append(self.summary())
        return "".join(line + "\n" for line in out)


def within_bar(figure, bar):
    """Whether `figure` is a number no larger than `bar` (a reason is never within it)."""
    try:
        return float(figure) <= float(bar)
    except ValueError:
        return False


def cells(*values):
    """A Markdown table row of `values`."""
    return "| " + " | ".join(str(v) for v in values) + " |"


def bench_header(title):
    rule = cells(*["---"] * (1 + len(BENCH_COLUMNS)))
    return cells(f"bench: {title}", *BENCH_COLUMNS) + "\n" + rule


def bench_row(figures, smi_mib, flops, peak):
    """A bench row from a run's figures (vescale_figures, or a peer's --json object): MFU from
    tokens/s and the config's FLOPs per token over `peak` (the same count for every row), or the
    run's own MFU where this check does not count the model (flops 0)."""
    gib = lambda b: "-" if b is None else f"{b / 2**30:.2f} GiB"
    mfu = f"{100 * flops * figures['tokens_per_s'] / peak:.1f}%" if peak > 0 else "-"
    if flops == 0 and figures.get("mfu"):
        mfu = f"{100 * figures['mfu']:.1f}% (its own)"
    smi = f"{int(smi_mib) / 1024:.2f} GiB" if smi_mib.isdigit() else "-"
    phases = figures.get("phases_ms")
    return cells(figures["who"], f"{figures['tokens_per_s']:,.0f}", mfu,
                 f"{figures['median_step_ms']:.1f}", gib(figures["peak_alloc_bytes"]),
                 gib(figures["peak_reserved_bytes"]), smi, f"{figures['warmup_s']:.2f}",
                 f"{figures['loss_first']:.3f} → {figures['loss_last']:.3f}",
                 " ".join(f"{k} {v:.1f}" for k, v in phases.items()) if phases else "-")

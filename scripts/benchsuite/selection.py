"""Which tables a run prints: BENCH, a comma list of table names, in the order below."""
import difflib

# Every table, in the order they print.
TABLES = ("comm", "peers", "peer-threads", "train", "pipeline", "zero", "checkpoint", "export",
          "recompute", "cp", "generate", "moe", "flight", "fused", "optimizer", "prepare",
          "jsonl", "muon", "muon-cost", "lora")
# BENCH unset: every table but the long ones (prepare, optimizer, muon, muon-cost, jsonl, lora)
# and peer-threads.
DEFAULT = "peers,comm,train,pipeline,zero,checkpoint,export,recompute,cp,generate,flight,fused,moe"


class SelectionError(ValueError):
    """A BENCH name that is no table."""


def selected(bench):
    """The tables BENCH names (None or empty: DEFAULT), in printing order; an unknown name raises
    SelectionError with the closest table names."""
    names = [n for n in (bench or DEFAULT).split(",") if n]
    for name in names:
        if name not in TABLES:
            close = difflib.get_close_matches(name, TABLES, n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise SelectionError(f"[bench] BENCH names no table {name!r}{hint} "
                                 f"(tables: {', '.join(TABLES)})")
    return [t for t in TABLES if t in names]

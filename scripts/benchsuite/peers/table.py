"""The peers table: per row its fastest candidate's median tokens/s (min-max), peak RSS and
setting, and its ratios to the rows it is compared with; every row's runs listed under it."""
import statistics

from benchsuite import stats


def best(runs, label):
    """The fastest candidate of label among runs ({name: [(tokens/s, RSS MiB)]}): (median
    tokens/s, its runs, its setting: what the brackets of `label [setting]` say, or `defaults`),
    or None when none finished."""
    found = []
    for name, v in runs.items():
        if v and (name == label or name.startswith(label + " [")):
            found.append((statistics.median(t for t, _ in v), v,
                          name[len(label):].strip(" []") or "defaults"))
    return max(found) if found else None


def note(b, r, ref, kind):
    """The comparison of a row's best b with ref's best r: `vescale overhead +N%` (kind
    overhead: ref over the row, less 1) or `R.RRx, M.MMx ref` (tokens/s, then peak RSS)."""
    v = b[1]
    ratio = stats.round_ratio([t for t, _ in v], [t for t, _ in r[1]])
    rss = statistics.median(x for _, x in v)
    ref_rss = statistics.median(x for _, x in r[1])
    if kind == "overhead":
        return f"vescale overhead {(ratio - 1) * 100:+.1f}%"
    return f"{ratio:.2f}x, {rss / ref_rss:.2f}x {ref}" if ref_rss else f"{ratio:.2f}x {ref}"


def lines(runs, specs):
    """The table's lines: specs are (label, refs: labels to compare with, kind: '' or overhead
    or grid, where the label names the setting and the threads column stays empty)."""
    w = max(len(label) for label, _, _ in specs)
    out = [f"{'row':<{w}} {'tokens/s':>9} {'min-max':>15} {'peak RSS':>9}  "
           f"{'vs. peer (tokens/s, peak RSS)':<58} threads"]
    notes = []
    for label, refs, kind in specs:
        b = best(runs, label)
        if b is None:
            out.append(f"{label:<{w}} {'failed':>9}")
            continue
        m, v, setting = b
        rss = statistics.median(r for _, r in v)
        found = [(ref, best(runs, ref)) for ref in refs]
        row_notes = "; ".join(note(b, r, ref, kind) for ref, r in found if r)
        tokens = [t for t, _ in v]
        out.append(f"{label:<{w}} {m:>9,.0f} {f'{min(tokens):,.0f}-{max(tokens):,.0f}':>15} "
                   f"{f'{rss:,.0f} MiB':>9}  {row_notes:<58} {'' if kind == 'grid' else setting}")
        notes.append(f"  {label} by round: " + ", ".join(f"{t:,.0f} ({r:,.0f} MiB)" for t, r in v))
        others = [(n, statistics.median(t for t, _ in x)) for n, x in runs.items()
                  if x and n.startswith(label + " [")]
        if len(others) > 1:
            notes.append(f"  {label} candidates: "
                         + "; ".join(f"{n[len(label):].strip(' []')}: {x:,.0f}" for n, x in others))
    return out + (notes or [""])  # a blank line when no row finished

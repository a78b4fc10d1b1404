"""Figures from the runs' files: metrics.jsonl loss curves and step times, eval and generate
output, a config's FLOPs per token, a Chrome trace's counts. A figure that cannot be computed
raises NoFigure with the reason, which then stands in the table's figure cell."""
import functools
import json
import math
import os
import re
import statistics
import tomllib

# NOTE [Step anatomy]: the table's name of each phase and metrics.jsonl's key for it.
PHASES = (("fwd", "forward"), ("bwd", "backward"), ("sync", "grad_sync"), ("opt", "optimizer"),
          ("other", "other"))
GENERATED_IDS = 19  # greedy generate's output: the 3 prompt ids and 16 new ones


class NoFigure(Exception):
    """A figure could not be computed; the message says why, short enough for a table cell."""


def or_reason(compute, *args):
    """(compute(*args), True), or (the reason, False) when the figure cannot be computed."""
    try:
        return compute(*args), True
    except NoFigure as e:
        return str(e), False


def reasoned(compute):
    """`compute` with a malformed file (a key missing, a value of the wrong kind, a line that is
    no JSON) as NoFigure, so that one bad run costs its row and not the table."""
    @functools.wraps(compute)
    def wrapper(*args):
        try:
            return compute(*args)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise NoFigure(f"unreadable figures: {type(e).__name__} {e}") from e
    return wrapper


def metrics(path):
    """The rows of a metrics.jsonl, in order ([] when the file is missing)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def curve(path):
    """A metrics.jsonl as {step: row}."""
    return {r["step"]: r for r in metrics(path)}


@reasoned
def max_relative(ref_path, run_path, first, count):
    """The largest |run - ref| / |ref| of loss and val_loss over the steps >= `first` of the
    run's metrics, `count` of them, all in the reference's; formatted as 1.23e-04."""
    ref, run = curve(ref_path), curve(run_path)
    steps = [s for s in sorted(run) if s >= first and s in ref]
    if len(steps) != count:
        raise NoFigure(f"{len(steps)} of {count} steps to compare")
    worst = max(abs(run[s][k] - ref[s][k]) / abs(ref[s][k])
                for s in steps for k in ("loss", "val_loss") if k in run[s] and k in ref[s])
    return f"{worst:.2e}"


@reasoned
def val_loss_relative(run_path, step, eval_text):
    """|eval's val_loss - the run's at `step`| / the run's, from eval's output `eval_text`."""
    ref = curve(run_path).get(step, {}).get("val_loss")
    said = re.findall(r"^val_loss (\S+)$", eval_text, re.M)
    if ref is None or not said:
        raise NoFigure("no val_loss to compare")
    return f"{abs(float(said[-1]) - ref) / abs(ref):.2e}"


def token_differences(dev_text, cpu_text):
    """How many of greedy generate's ids differ between two outputs (each 19 ids)."""
    dev, cpu = dev_text.split(), cpu_text.split()
    if len(dev) != GENERATED_IDS or len(cpu) != GENERATED_IDS:
        raise NoFigure(f"{len(dev)} and {len(cpu)} ids, not {GENERATED_IDS}")
    return str(sum(a != b for a, b in zip(dev, cpu)))


def load_config(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def model_flops(config):
    """(FLOPs per token, metrics.peak_flops or 0.0) of a GPT config, counted as vescale-train's
    MFU counts them (models/gpt_family.cpp): 6 per parameter (all of them, the tied head once)
    and token, plus 12 L C T for attention."""
    m, t = config["model"], config["training"]
    layers, width, seq = m["n_layer"], m["n_embd"], t["seq_len"]
    multiple = max(1, m.get("vocab_multiple", 64)) * config.get("parallel", {}).get("tp", 1)
    vocab = math.ceil(m["vocab_size"] / multiple) * multiple
    params = (vocab * width + m["block_size"] * width
              + layers * (12 * width * width + 13 * width) + 2 * width)
    return (6 * params + 12 * layers * width * seq,
            float(config.get("metrics", {}).get("peak_flops", 0)))


@reasoned
def step_figures(path, tokens, warmup, who):
    """A run's metrics.jsonl as the peer's --json object: the median step after `warmup` steps
    and tokens/s from it, each phase's median, the median MFU, the warm-up's time, the first and
    last loss, and the GPU allocator's peaks (gpu_mem, on CUDA)."""
    rows = metrics(path)
    timed = [r for r in rows if r["step"] > warmup]
    if not timed:
        raise NoFigure(f"no steps after the first {warmup} in {path}")
    median = statistics.median(r["step_time_s"] for r in timed)

    def peak(key):
        seen = [r["gpu_mem"][key] for r in rows if "gpu_mem" in r]
        return max(seen) if seen else None
    mfus = [r["mfu"] for r in timed if r.get("mfu")]
    return dict(who=who, tokens_per_s=tokens / median,
                phases_ms={name: 1e3 * statistics.median(r["time_s"][key] for r in timed)
                           for name, key in PHASES},
                mfu=statistics.median(mfus) if mfus else None, median_step_ms=median * 1e3,
                warmup_s=sum(r["step_time_s"] for r in rows if r["step"] <= warmup),
                peak_alloc_bytes=peak("allocated_peak"), peak_reserved_bytes=peak("reserved_peak"),
                loss_first=rows[0]["loss"], loss_last=rows[-1]["loss"])


@reasoned
def mfu_agreement(path, flops, peak, warmup):
    """(figure, within 1 point): vescale-train's MFU in each step's metrics after `warmup`
    against `flops` per token at that step's tokens/s over `peak`, the last pair and the widest
    gap, in percent."""
    pairs = [(100 * r["mfu"], 100 * flops * r["tokens_per_s"] / peak)
             for r in metrics(path) if r["step"] > warmup]
    if not pairs:
        raise NoFigure("no steps to compare")
    worst = max(abs(a - b) for a, b in pairs)
    return (f"{pairs[-1][0]:.2f}% vs {pairs[-1][1]:.2f}%, at most {worst:.2f} points apart",
            worst <= 1.0)


@reasoned
def trace_counts(path):
    """(bytes, phase events, kernel events) of a Chrome trace (an object with traceEvents, or a
    list of events)."""
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    count = lambda cat: sum(1 for e in events if isinstance(e, dict) and e.get("cat") == cat)
    return os.path.getsize(path), count("phase"), count("kernel")

"""bench: GPT-2 124M bf16 (configs/gpt2-124m.toml; --cpu: a small GPT) in vescale-train, in
vescale-train without its fused loss and projections, PyTorch eager and torch.compile
(bench/peers/gpt_torch.py): tokens/s, MFU, peak GPU memory, each step's phases; a short run whose
own MFU (NOTE [MFU peak]) is held to this check's 6N + 12LCT within 1 point; last Llama 1.1B
(configs/llama-1b.toml; --cpu: configs/llama-tiny.toml) with its own MFU. Each row is skipped
past the deadline."""
import contextlib
import json
import os
import re

from gpucheck import configs, figures, logfiles, machine, runs, table

SAID_PEAK = re.compile(r".*\[mfu\] peak ([0-9.e+-]*) TFLOP/s per rank: (.*)")
# The GPUs whose dense bf16 peak the config's metrics.peak_flops is: an H100 SXM, an H200.
CONFIG_PEAK_GPUS = re.compile(r"H100 80GB HBM3|H200$")
LLAMA = {"gpu": ("configs/llama-1b.toml", 4, 2048, "989e12"),  # an H100 SXM's dense bf16 peak
         "cpu": ("configs/llama-tiny.toml", 4, 64, "0")}


def skipped_row(check, who, why="past the deadline"):
    check.report.add("bench", f"| {who} | skipped: {why} |", "skipped")


def vescale_row(check, run, who, config, tokens, flops, peak, *args):
    """vescale-train's row `who` from run `run` of `config` with `args`."""
    if not check.clock.may_start(f"bench {who}"):
        return skipped_row(check, who)
    found = None
    if runs.train(check, run, 240, config, *args) == 0:
        with contextlib.suppress(figures.NoFigure):
            found = figures.step_figures(check.log(f"{run}.jsonl"), tokens, check.device.warmup,
                                         who)
    if found is None:
        return check.report.add("bench", f"| {who} | FAIL: {runs.why_failed(check, run)} |", "FAIL")
    check.report.add("bench", table.bench_row(found, runs.smi_max(check, run), flops, peak), "ok")


def peer_row(check, who, config, flops, peak, *args):
    """A peer's row; skipped, with the peer's reason, where this torch cannot (its exit 2: no
    torch.compile, no GPU). The peer must be the model vescale-train trains: the same FLOPs per
    token, hence parameters."""
    if not check.torch_python:
        return skipped_row(check, who, "no python3 here imports torch (set PYTHON)")
    if not check.clock.may_start(f"bench {who}"):
        return skipped_row(check, who)
    rc = runs.peer(check, f"bench_{who}", config, *args)
    said = logfiles.last_line(check.log(f"bench_{who}.log"))
    if rc == 2:
        return skipped_row(check, who, said.removeprefix("[peer] "))
    if rc != 0 or not said.startswith("{"):
        return check.report.add("bench", f"| {who} | FAIL: exit {rc}: {said} |", "FAIL")
    found = json.loads(said)
    if str(found["flops_per_token"]) != str(flops):
        return check.report.add("bench", f"| {who} | FAIL: not the same model: "
                                f"{found['flops_per_token']} FLOPs per token, the config's "
                                f"{flops} |", "FAIL")
    check.report.add("bench", table.bench_row(found, runs.smi_max(check, f"bench_{who}"), flops,
                                              peak), "ok")


def mfu_row(check, run, flops, config_peak):
    """vescale-train's MFU in run's metrics against this check's count (`flops` per token at the
    line's own tokens/s) over the peak it expects: on an H100 SXM or H200 the config's
    metrics.peak_flops (their dense bf16 figure), else the peak the run said it used (its
    `[mfu]` line), which then checks the FLOP count only."""
    log, jsonl = check.log(f"{run}.log"), check.log(f"{run}.jsonl")
    if not os.path.exists(log):
        return check.report.add("mfu", "mfu: skipped: vescale-train's bench row did not run",
                                "skipped")
    if run in check.run_failed or not os.path.exists(jsonl):
        return check.report.add("mfu", f"mfu: FAIL: {runs.why_failed(check, run)}", "FAIL")
    said = next(filter(None, map(SAID_PEAK.match, logfiles.lines(log))), None)
    expected = f"{said.group(1) if said else ''}e12"
    source = f"vescale-train's own peak ({said.group(2) if said else ''})"
    if check.mode == "gpu" and config_peak != 0 and CONFIG_PEAK_GPUS.search(check.gpu_name):
        expected = config_peak
        source = f"the config's metrics.peak_flops, {check.gpu_name}'s dense bf16"
    if not said:
        figure, within = f"no [mfu] line in {run}.log", False
    else:
        try:
            figure, within = figures.mfu_agreement(jsonl, flops, float(expected),
                                                   check.device.warmup)
        except figures.NoFigure as e:
            figure, within = str(e), False
    verdict = "ok" if within else "FAIL"
    hint = ""
    # NOTE [GPU-verified]: a GPU that passed with the device table's figure verifies that code.
    if check.mode == "gpu" and verdict == "ok" and "datasheet" in said.group(2):
        hint = (f' (the device table ran: write {{"{machine.today()}", "{check.gpu_name}"}} as '
                "kDevicePeakRun in lib/train/peak_flops.cpp)")
    check.report.add("mfu", f"mfu: vescale-train's metrics.jsonl vs 6N + 12LCT over {source}: "
                     f"{figure} (bar 1 point): {verdict}{hint}", verdict)
    check.say(f"mfu: {figure}: {verdict}")


def llama_row(check):
    """configs/llama-1b.toml on one GPU (1.1B parameters, 22 layers, GQA 32/4 heads, batch 4 x
    2048, bf16, synthetic tokens), its MFU as its metrics count it (NOTE [MFU peak]) against
    989 TFLOP/s, the dense bf16 peak of an H100 SXM and an H200; --cpu: llama-tiny."""
    config, batch, seq, peak = LLAMA[check.mode]
    name = os.path.basename(config).removesuffix(".toml")
    vescale_row(check, "bench_llama", f"vescale-train {name} B{batch}×{seq}", config, batch * seq,
                0, 0, f"--training.steps={check.device.bench_steps}", "--parallel.dp=1",
                "--parallel.tp=1", "--parallel.zero=0", "--parallel.microbatches=1",
                "--parallel.plan=llama/dp-only", f"--training.global_batch_size={batch}",
                f"--training.seq_len={seq}", "--data.source=synthetic",
                f"--training.device={check.device.name}", f"--metrics.peak_flops={peak}",
                "--metrics.log_interval=1", "--checkpoint.interval=0", "--eval.interval=0",
                "--eval.windows=1")


def run(check):
    device = check.device
    config = configs.bench_job(check.mode, check.logs)
    parsed = figures.load_config(config)
    flops, peak = figures.model_flops(parsed)
    training = parsed["training"]
    tokens = training["global_batch_size"] * training["seq_len"]
    check.report.bench_title = (f"{os.path.basename(config).removesuffix('.toml')} "
                                f"{training.get('dtype', 'float32')}, {tokens} tokens a step, "
                                f"{device.bench_steps} steps, medians after step {device.warmup}")
    steps = f"--training.steps={device.bench_steps}"
    vescale_row(check, "bench_vescale", "vescale-train", config, tokens, flops, peak, steps)
    # vescale-train's own MFU from the peak it finds for the device (NOTE [MFU peak]; opted in
    # while no GPU has run that code, NOTE [GPU-verified]), a few steps past the warm-up.
    if check.clock.may_start("mfu check"):
        runs.train(check, "mfu_check", 240, config, f"--training.steps={device.warmup + 5}",
                   "--metrics.peak_flops=0", "--training.unverified_kernels=true")
        mfu_row(check, "mfu_check", flops, peak)
    else:
        check.report.add("mfu", "mfu: skipped: past the deadline", "skipped")
    # The same without NOTE [Fused LM loss] and NOTE [Fused projections]: their gain in this run.
    vescale_row(check, "bench_vescale_unfused", "vescale-train (unfused)", config, tokens, flops,
                peak, steps, "--training.fused_loss=false", "--training.fused_projections=false")
    peer_row(check, "torch-eager", config, flops, peak, steps)
    peer_row(check, "torch-compile", config, flops, peak, steps, "--compile")
    llama_row(check)

"""profile: `train --profile 3-3`, the Chrome trace's phase and CUDA kernel events, and from them
(scripts/lib/trace_summary.py) how long the GPU was busy in the step and its 12 kernels of most
device time."""
import os
import shutil
import sys

from gpucheck import configs, figures, logfiles, runs


def run(check):
    config = configs.bench_job(check.mode, check.logs)
    trace = os.path.join(check.scratch, "profile/trace.json")
    rc = runs.train(check, "profile", 180, config,
                    f"--training.steps={check.device.profile_steps}", "--profile", "3-3")
    if rc != 0 or not os.path.isfile(trace):
        missing = "" if os.path.isfile(trace) else ", no trace.json"
        return check.report.add("profile", f"profile: FAIL: train --profile 3-3 exit {rc}{missing}",
                                "FAIL")
    shutil.copyfile(trace, check.log("profile.trace.json"))
    try:
        size, phases, kernels = figures.trace_counts(trace)
    except figures.NoFigure as e:
        return check.report.add("profile", f"profile: FAIL: {e}", "FAIL")
    verdict, note = "ok", ""
    if phases == 0:
        verdict, note = "FAIL", " (no phases)"
    if check.mode != "gpu":
        note += " (no kernels expected on the CPU)"
    elif kernels == 0:
        verdict, note = "FAIL", note + " (no CUDA kernels)"
    check.report.add("profile", f"profile: trace.json {size // 1024} KiB, {phases} phase events, "
                     f"{kernels} kernel events{note}: {verdict}", verdict)
    # The step's GPU busy time (the rest is the device waiting for the host) and its top kernels.
    summary = check.log("trace_summary.log")
    runs.run_limited([sys.executable, "scripts/lib/trace_summary.py", trace, "--top", "12"], 120,
                     summary)
    check.report.profile += [f"profile: {line}" for line in logfiles.lines(summary)]

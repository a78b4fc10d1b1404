"""build: the wheel route on a GPU machine (scripts/setup-cuda.sh configures build-cuda/, Release,
against the machine's PyTorch; then only vescale-train is built); --cpu builds with
scripts/build.sh only when there is no binary; VESCALE_TRAIN skips it."""
import os
import re

from gpucheck import logfiles, machine, runs

CPU_BUILD_LIMIT = 7200  # a fresh build takes ~20 minutes on 2 cores
OUR_FOLDERS = "lib|app|models|tests|plugins|bench"
WARNING_CONTEXT = 40  # lines before a warning searched for the line of ours that led to it
MAX_SITES = 5


def executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def warning_sites(log_text, root):
    """"-Wflag at lib/x.cpp:12, ..." for the warnings of a build log: each one's last line of
    this tree (under `root`) among the lines that lead to it, so that a warning inside a library
    header names the line of ours that inlined it (up to 5 sites)."""
    ours = re.compile(re.escape(root.rstrip("/") + "/") + rf"((?:{OUR_FOLDERS})/[^:' ]+:\d+)")
    sites, context = [], []
    for line in log_text.splitlines():
        context.append(line)
        if "warning:" not in line:
            continue
        flag = re.search(r"\[(-W[^\]=]+)", line)
        found = [m.group(1) for seen in context[-WARNING_CONTEXT:] for m in ours.finditer(seen)]
        where = found[-1] if found else "a library header"
        site = f"{flag.group(1) if flag else 'warning'} at {where}"
        if site not in sites:
            sites.append(site)
        context = []
    return ", ".join(sites[:MAX_SITES])


def build_row(check, note, argv, seconds):
    """Builds with argv in `seconds`, and makes the build row: time, warnings, last lines."""
    started = check.clock.seconds()
    log = check.log("build.log")
    rc = runs.run_limited(argv, seconds, log)
    text = logfiles.read(log)
    warnings = str(sum("warning:" in line for line in text.splitlines()))
    sites = warning_sites(text, os.getcwd())
    if sites:
        warnings += f" ({sites})"
    took = check.clock.seconds() - started
    check.say(f"build: exit {rc} in {took} s, {warnings} warnings; its last lines:")
    logfiles.indented(logfiles.tail(log, 3))
    if rc == 0 and executable(check.binary):
        check.report.add("build", f"build: ok in {took} s, {warnings} warnings ({note})", "ok")
        return
    errors = [line for line in text.splitlines() if "error" in line]
    logfiles.indented(errors[:5])
    check.report.add("build", f"build: FAIL (exit {rc}, {warnings} warnings; {note}): "
                     f"{errors[0] if errors else ''}", "FAIL")
    check.build_failed = True


def build_cuda(check):
    """Configures build-cuda/ with the machine's PyTorch (Release, vescale-train only: the tests
    and benches would double the build's time), then builds vescale-train."""
    started = check.clock.seconds()
    log = check.log("configure.log")
    rc = runs.run_limited(["scripts/setup-cuda.sh", "--configure-only", "-DVESCALE_BUILD_TESTS=OFF",
                           "-DVESCALE_BUILD_BENCH=OFF"], check.clock.limit(240), log,
                          env=dict(os.environ, BUILD_DIR="build-cuda", BUILD_TYPE="Release"))
    found = re.search(r"vescale-train:.*", logfiles.read(log))
    facts = found.group(0) if found else ""
    check.say(f"configure: exit {rc} in {check.clock.seconds() - started} s; "
              f"{facts or 'no vescale-train: line'}")
    if rc != 0:
        logfiles.indented(logfiles.tail(log, 5))
        check.report.add("build", "build: FAIL: scripts/setup-cuda.sh --configure-only exit "
                         f"{rc}: {logfiles.last_line(log)}", "FAIL")
        check.build_failed = True
        return
    build_row(check, f"configure {check.clock.seconds() - started} s; {facts}",
              ["cmake", "--build", "build-cuda", "--target", "vescale-train", "-j",
               machine.cores()], check.clock.limit(420))


def run(check):
    if os.environ.get("VESCALE_TRAIN"):
        given = os.environ["VESCALE_TRAIN"]
        if executable(check.binary):
            check.report.add("build", f"build: skipped (VESCALE_TRAIN={given})", "skipped")
        else:
            check.report.add("build", f"build: FAIL: VESCALE_TRAIN={given} is no executable "
                             f"({check.binary})", "FAIL")
            check.build_failed = True
    elif check.mode == "cpu":
        if executable(check.binary):
            check.report.add("build", f"build: skipped ({check.binary} exists)", "skipped")
            return
        # The deadline budgets the GPU machine's one call, so on the CPU it counts from after
        # the build.
        started = check.clock.seconds()
        build_row(check, "scripts/build.sh", ["scripts/build.sh"], CPU_BUILD_LIMIT)
        check.clock.postpone(check.clock.seconds() - started)
    else:
        build_cuda(check)
